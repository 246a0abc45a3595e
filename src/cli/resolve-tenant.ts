import { checkTenantSlug } from '../util/tenant-slug.js';

/**
 * The tenant a command works for: `--tenant`, else `STAGECOACH_TENANT`, checked as a slug before
 * anything else happens (no file read, no broker touched). An empty `STAGECOACH_TENANT` counts as
 * unset, as deployments template it for shared stages too; an empty `--tenant` is refused.
 * @throws TenantError naming the option or variable it came from (exit 2).
 */
export function resolveTenant(option: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (option !== undefined) return checkTenantSlug(option, '--tenant');
  const fromEnv = env.STAGECOACH_TENANT;
  return fromEnv === undefined || fromEnv === '' ? undefined : checkTenantSlug(fromEnv, 'STAGECOACH_TENANT');
}
