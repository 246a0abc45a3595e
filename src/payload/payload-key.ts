import { InvalidPayloadError } from '../errors/errors.js';
import { isTenantSlug } from '../util/tenant-slug.js';
import type { PayloadKey } from './payload-store.js';

/** The tenant of a payload whose job has none. Never a slug: slugs start with a letter or digit. */
export const NO_TENANT = '_';

/** A UUID in its canonical text form (any version), either case. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a payload tenant: a tenant slug or `_`. */
export function isPayloadTenant(value: unknown): value is string {
  return value === NO_TENANT || isTenantSlug(value);
}

/**
 * Returns `key` checked and canonical (the id in lower case), so that a store can build a path or
 * a query from it: the tenant is a slug or `_`, the id a UUID. Nothing else ever reaches a store,
 * so a reference that comes off the wire can never name a file outside the store's directory.
 *
 * @throws InvalidPayloadError (`INVALID_PAYLOAD`) naming what is wrong.
 */
export function checkPayloadKey(key: PayloadKey): PayloadKey {
  // Checked field by field: a reference parsed from a header may be anything.
  const { tenant, id } = (key ?? {}) as Partial<Record<keyof PayloadKey, unknown>>;
  if (!isPayloadTenant(tenant)) throw new InvalidPayloadError(`payload reference: tenant ${show(tenant)} is not a tenant slug or "_"`);
  if (typeof id !== 'string' || !UUID.test(id)) throw new InvalidPayloadError(`payload reference: id ${show(id)} is not a UUID`);
  return { tenant, id: id.toLowerCase() };
}

/** Checks a tenant given alone (`count(tenant)`). */
export function checkPayloadTenant(tenant: string): string {
  if (!isPayloadTenant(tenant)) throw new InvalidPayloadError(`payload tenant ${show(tenant)} is not a tenant slug or "_"`);
  return tenant;
}

/** The value as a message shows it, cut short: it may come off the wire. */
function show(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : String(value);
  return text.length > 80 ? `${text.slice(0, 80)}...` : text;
}
