import { TenantError } from '../errors/errors.js';

/**
 * A tenant slug (docs/cli.md "Tenant slugs"). No dots, so that `<prefix>.queue.<queue>.<tenant>`
 * and `<prefix>.queue.<queue>.<tenant>.<variant>` can never name the same queue: without the rule,
 * tenant `acme.pdf` would read acme's `pdf` variant queue. The shipped JSON Schema
 * (`definitions.tenant`) carries the same pattern; a unit test keeps the two equal.
 *
 * Tested once per delivery (the tenant header and the envelope's `tenant`): keep it a plain,
 * precompiled, anchored expression without backtracking.
 */
export const TENANT_SLUG = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** The rule in words, for messages. */
export const TENANT_SLUG_RULE = `${TENANT_SLUG.source}: lowercase letters, digits, "_" and "-", no dots, at most 63 characters`;

export function isTenantSlug(value: unknown): value is string {
  return typeof value === 'string' && TENANT_SLUG.test(value);
}

/** `"acme.pdf" is not a tenant slug (rule)`: the reason, without saying where the value came from. */
export function notATenantSlug(value: unknown): string {
  return `${show(value)} is not a tenant slug (${TENANT_SLUG_RULE})`;
}

/**
 * Returns `value` when it is a tenant slug.
 * @param where what carried it (`--tenant`, `STAGECOACH_TENANT`, `tenant`): the message starts with it.
 * @throws TenantError (`INVALID_REQUEST`; exit code 2 on the command line) naming the value and the rule.
 */
export function checkTenantSlug(value: unknown, where: string): string {
  if (isTenantSlug(value)) return value;
  throw new TenantError(typeof value === 'string' ? value : String(value), `${where}: ${notATenantSlug(value)}`);
}

/** The value as a message shows it: quoted, typed when not a string, cut short (it may come off the wire). */
function show(value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    json = undefined; // a bigint or a cycle: its type says enough
  }
  const shown = typeof value === 'string' ? (json as string) : json === undefined ? typeof value : `${typeof value} ${json}`;
  return shown.length > 100 ? `${shown.slice(0, 100)}...` : shown;
}
