import { createHmac, timingSafeEqual } from 'node:crypto';

/** Marks a tenant's bearer token (`stagecoach credentials <T> --role http`). */
const TENANT_PREFIX = 'sct1';
/** Marks a read-only viewer's bearer token (`stagecoach credentials <name> --role viewer`). */
const VIEWER_PREFIX = 'scv1';

/** Who a derived token speaks for: a tenant (confined to it) or a viewer (reads everything, changes nothing). */
export type TokenHolder = { kind: 'tenant'; tenant: string } | { kind: 'viewer'; name: string };

/**
 * The bearer token that confines its holder to tenant `tenant`: the tenant and an HMAC-SHA256 of
 * it under the admin token, bound to the prefix. Nothing is stored: the server checks it with the
 * admin token it has, so rotating the admin token revokes every derived token at once
 * (docs/security.md, "The admin port").
 */
export function tenantToken(adminToken: string, prefix: string, tenant: string): string {
  return `${TENANT_PREFIX}.${tenant}.${mac(adminToken, prefix, 'tenant', tenant).toString('base64url')}`;
}

/** A read-only token for `name` (a person or a dashboard): every tenant's data, no change. Derived as tenant tokens are. */
export function viewerToken(adminToken: string, prefix: string, name: string): string {
  return `${VIEWER_PREFIX}.${name}.${mac(adminToken, prefix, 'viewer', name).toString('base64url')}`;
}

/** The holder of a derived bearer token, or undefined when it is not a valid one of this server's. */
export function holderOfToken(adminToken: string | undefined, prefix: string, bearer: string): TokenHolder | undefined {
  if (adminToken === undefined || adminToken === '') return undefined;
  const [kind, name, given, ...rest] = bearer.split('.');
  if (name === undefined || given === undefined || rest.length > 0 || name === '') return undefined;
  const role = kind === TENANT_PREFIX ? 'tenant' : kind === VIEWER_PREFIX ? 'viewer' : undefined;
  if (role === undefined) return undefined;
  const expected = mac(adminToken, prefix, role, name);
  const actual = Buffer.from(given, 'base64url');
  if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return undefined;
  return role === 'tenant' ? { kind: 'tenant', tenant: name } : { kind: 'viewer', name };
}

/** The tenant a bearer token was issued for, or undefined when it is not a valid tenant token. */
export function tenantOfToken(adminToken: string | undefined, prefix: string, bearer: string): string | undefined {
  const holder = holderOfToken(adminToken, prefix, bearer);
  return holder?.kind === 'tenant' ? holder.tenant : undefined;
}

function mac(adminToken: string, prefix: string, role: 'tenant' | 'viewer', name: string): Buffer {
  // The tenant's message is the one its tokens were always derived from: issued tokens stay valid.
  const message = role === 'tenant' ? `stagecoach http tenant\n${prefix}\n${name}` : `stagecoach http viewer\n${prefix}\n${name}`;
  return createHmac('sha256', adminToken).update(message).digest();
}
