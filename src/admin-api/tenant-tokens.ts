import { createHmac, timingSafeEqual } from 'node:crypto';

/** Marks a tenant's bearer token for the OJS HTTP binding (`stagecoach credentials <T> --role http`). */
const TOKEN_PREFIX = 'sct1';

/**
 * The bearer token that confines its holder to tenant `tenant` on the HTTP binding: the tenant
 * and an HMAC-SHA256 of it under the admin token, bound to the prefix. Nothing is stored: the
 * server checks it with the admin token it has, so rotating the admin token revokes every
 * tenant token at once (docs/http-binding.md, Tenants).
 */
export function tenantToken(adminToken: string, prefix: string, tenant: string): string {
  return `${TOKEN_PREFIX}.${tenant}.${mac(adminToken, prefix, tenant).toString('base64url')}`;
}

/** The tenant a bearer token was issued for, or undefined when it is not a valid tenant token. */
export function tenantOfToken(adminToken: string | undefined, prefix: string, bearer: string): string | undefined {
  if (adminToken === undefined || adminToken === '') return undefined;
  const [kind, tenant, given, ...rest] = bearer.split('.');
  if (kind !== TOKEN_PREFIX || tenant === undefined || given === undefined || rest.length > 0 || tenant === '') return undefined;
  const expected = mac(adminToken, prefix, tenant);
  const actual = Buffer.from(given, 'base64url');
  return actual.length === expected.length && timingSafeEqual(actual, expected) ? tenant : undefined;
}

function mac(adminToken: string, prefix: string, tenant: string): Buffer {
  return createHmac('sha256', adminToken).update(`stagecoach http tenant\n${prefix}\n${tenant}`).digest();
}
