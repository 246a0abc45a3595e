import { ConfigError, StageNotFoundError, StagecoachError, TenantError } from '../errors/errors.js';

export const EXIT_OK = 0;
export const EXIT_RUNTIME = 1;
export const EXIT_USAGE = 2;
/**
 * `plan` found differences (and `apply` left some to the operator): not a failure, so neither
 * 1 nor 2, but not "nothing to do" either, for scripts and CI checks (`stagecoach plan || ...`).
 */
export const EXIT_DIFFERS = 3;

/** Bad usage and bad configuration exit 2; anything that went wrong at run time exits 1. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof ConfigError || err instanceof StageNotFoundError || err instanceof TenantError) return EXIT_USAGE;
  if (
    err instanceof StagecoachError &&
    ['TENANT_REQUIRED', 'TENANT_MISMATCH', 'INVALID_REQUEST', 'JOB_TYPE_NOT_ALLOWED', 'INVALID_RETRY_POLICY'].includes(err.code)
  )
    return EXIT_USAGE;
  return EXIT_RUNTIME;
}
