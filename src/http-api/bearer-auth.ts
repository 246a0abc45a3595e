import { createHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from './api-error.js';
import { holderOfToken } from './tenant-tokens.js';

/** The environment variable holding the admin API's bearer token. */
export const ADMIN_TOKEN_ENV = 'STAGECOACH_ADMIN_TOKEN';

/**
 * Checks `Authorization: Bearer <token>` against the configured token; throws a 401 otherwise.
 *
 * Both sides are hashed before the constant-time comparison, so neither the comparison's time
 * nor a length check tells anything about the token. With no token configured every change is
 * refused, saying how to allow them: an admin API that changes queues for anyone who can reach
 * it is never the default.
 */
export function checkBearer(authorization: string | undefined, token: string | undefined): void {
  if (token === undefined || token === '') {
    throw new ApiError(
      401,
      'UNAUTHORIZED',
      `changes are disabled: no admin token is configured; set ${ADMIN_TOKEN_ENV} where \`stagecoach admin\` runs and send it as "Authorization: Bearer <token>"`,
    );
  }
  const given = /^Bearer[ ]+(\S+)[ ]*$/i.exec(authorization ?? '')?.[1];
  if (given === undefined) throw new ApiError(401, 'UNAUTHORIZED', 'this request changes state: send "Authorization: Bearer <token>"');
  if (!timingSafeEqual(digest(given), tokenDigest(token))) throw new ApiError(401, 'UNAUTHORIZED', 'the bearer token is not valid');
}

/** The configured token's digest, kept: it is the same on every request. */
let configured: { token: string; digest: Buffer } | undefined;
function tokenDigest(token: string): Buffer {
  if (configured?.token !== token) configured = { token, digest: digest(token) };
  return configured.digest;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * Who may call a route beside the admin token: `open`, anyone, without a token (health, the
 * manifest); `tenant`, also a tenant's token, whose handler confines it to its tenant
 * (request-tenant.ts); `operator`, the admin token only, and a viewer's token on a route that
 * changes nothing.
 */
export type RouteAccess = 'open' | 'tenant' | 'operator';

/**
 * Who sent a request: the admin (its token, or `--no-auth` without one), a viewer (reads
 * everything, changes nothing), a tenant (confined to it), or no one (only where no admin token
 * is configured: reads then stay open, as on a loopback-only development server).
 */
export type Caller = { kind: 'admin' } | { kind: 'viewer'; name: string } | { kind: 'tenant'; tenant: string } | { kind: 'anonymous' };

/**
 * The caller of a request to a route, or a refusal: the one place that decides who may call what
 * (docs/security.md, "The admin port").
 * - `open` routes take anyone.
 * - Without a token: the admin under `--no-auth`; refused (401) once an admin token is configured;
 *   otherwise anonymous, for reads only (changes need the token, which is not configured).
 * - A tenant token: `tenant` routes only (403 elsewhere); the handler confines it to its tenant.
 * - A viewer token: any route that changes nothing (403 on changes).
 * - Any other token must be the admin token (401 otherwise).
 */
export function callerOf(
  authorization: string | undefined,
  options: { token: string | undefined; prefix: string; noAuth: boolean },
  route: { mutating: boolean; access?: RouteAccess },
): Caller {
  const access = route.access ?? 'operator';
  const configured = options.token !== undefined && options.token !== '';
  if (authorization === undefined) {
    if (options.noAuth) return { kind: 'admin' };
    if (access === 'open') return { kind: 'anonymous' };
    if (route.mutating) checkBearer(authorization, options.token);
    if (configured) throw new ApiError(401, 'UNAUTHORIZED', 'this endpoint serves tenants\' data: send "Authorization: Bearer <token>"');
    return { kind: 'anonymous' };
  }
  const given = /^Bearer[ ]+(\S+)[ ]*$/i.exec(authorization)?.[1];
  const holder = given === undefined ? undefined : holderOfToken(options.token, options.prefix, given);
  if (holder?.kind === 'tenant') {
    if (access === 'operator')
      throw new ApiError(403, 'UNAUTHORIZED', "a tenant's token serves its own tenant's jobs only; this endpoint needs the admin token");
    return holder;
  }
  if (holder?.kind === 'viewer') {
    if (route.mutating)
      throw new ApiError(403, 'UNAUTHORIZED', 'a viewer token reads only; this request changes state and needs the admin token');
    return holder;
  }
  if (access === 'open') {
    try {
      checkBearer(authorization, options.token);
      return { kind: 'admin' };
    } catch {
      return { kind: 'anonymous' };
    }
  }
  checkBearer(authorization, options.token);
  return { kind: 'admin' };
}
