import { InvalidPayloadError } from '../errors/errors.js';
import type { PayloadKey } from './payload-store.js';

/** A tenant slug, or `_` for a job without a tenant. */
const TENANT = /^(?:[a-z0-9][a-z0-9_-]{0,62}|_)$/;
/** A UUID (any version), lowercase as `randomUUID` makes them. */
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The value of `x-ojs-payload-ref` (docs/payloads.md, for producers and consumers in other
 * languages): `<tenant>/<id>`, the tenant slug (`_` for a job without one) and a UUID. Nothing in
 * it can leave the store's namespace: both parts are checked wherever a reference is read.
 */
export function formatPayloadRef(key: PayloadKey): string {
  return `${key.tenant}/${key.id}`;
}

/** @throws InvalidPayloadError for anything but `<tenant>/<uuid>`. */
export function parsePayloadRef(value: unknown): PayloadKey {
  if (typeof value === 'string') {
    const slash = value.indexOf('/');
    const tenant = value.slice(0, slash);
    const id = value.slice(slash + 1);
    if (slash > 0 && TENANT.test(tenant) && ID.test(id)) return { tenant, id };
  }
  throw new InvalidPayloadError(`x-ojs-payload-ref ${JSON.stringify(value)?.slice(0, 120)} is not "<tenant>/<uuid>"`);
}

/** The store's name for a job's tenant. */
export function payloadTenant(tenant: string | undefined): string {
  return tenant ?? '_';
}
