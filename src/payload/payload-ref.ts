import { InvalidPayloadError } from '../errors/errors.js';
import { checkPayloadKey, NO_TENANT } from './payload-key.js';
import type { PayloadKey } from './payload-store.js';

/**
 * The value of `x-ojs-payload-ref` (docs/payloads.md, for producers and consumers in other
 * languages): `<tenant>/<id>`, the tenant slug (`_` for a job without one) and a UUID. Nothing in
 * it can leave the store's namespace: both parts are checked wherever a reference is read.
 */
export function formatPayloadRef(key: PayloadKey): string {
  return `${key.tenant}/${key.id}`;
}

/**
 * The key a reference names, checked as every store checks its keys (checkPayloadKey); the id
 * as sent, in lower case, as `randomUUID` makes them.
 * @throws InvalidPayloadError for anything but `<tenant>/<uuid>`.
 */
export function parsePayloadRef(value: unknown): PayloadKey {
  if (typeof value === 'string') {
    const slash = value.indexOf('/');
    const sent = { tenant: value.slice(0, slash), id: value.slice(slash + 1) };
    try {
      const key = checkPayloadKey(sent);
      if (slash > 0 && key.id === sent.id) return key;
    } catch {
      // said below, with the whole value
    }
  }
  throw new InvalidPayloadError(`x-ojs-payload-ref ${JSON.stringify(value)?.slice(0, 120)} is not "<tenant>/<uuid>"`);
}

/** The store's name for a job's tenant. */
export function payloadTenant(tenant: string | undefined): string {
  return tenant ?? NO_TENANT;
}
