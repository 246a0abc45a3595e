import { createHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from './api-error.js';
import { tenantOfToken } from './tenant-tokens.js';

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
  if (!timingSafeEqual(digest(given), digest(token))) throw new ApiError(401, 'UNAUTHORIZED', 'the bearer token is not valid');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Who sent a request: the admin (its token, or `--no-auth` without one), a tenant (its HTTP token), or no one. */
export type Caller = { kind: 'admin' } | { kind: 'tenant'; tenant: string } | { kind: 'anonymous' };

/**
 * The caller of a request to a route. A tenant token (tenant-tokens.ts) is taken on the routes
 * that confine to a tenant (`tenantRoute`) and refused (403) elsewhere; any other token must be
 * the admin token on a route that changes state (checkBearer), and on a read only identifies the
 * admin when it is (reads are open, as they always were). `--no-auth` makes a request without
 * an `Authorization` header the admin's.
 */
export function callerOf(
  authorization: string | undefined,
  options: { token: string | undefined; prefix: string; noAuth: boolean },
  route: { mutating: boolean; tenantRoute?: boolean },
): Caller {
  if (authorization === undefined) {
    if (options.noAuth) return { kind: 'admin' };
    if (route.mutating) checkBearer(authorization, options.token);
    return { kind: 'anonymous' };
  }
  const given = /^Bearer[ ]+(\S+)[ ]*$/i.exec(authorization)?.[1];
  const tenant = given === undefined ? undefined : tenantOfToken(options.token, options.prefix, given);
  if (tenant !== undefined) {
    if (route.tenantRoute !== true)
      throw new ApiError(403, 'UNAUTHORIZED', 'a tenant token serves the OJS HTTP binding only; this endpoint needs the admin token');
    return { kind: 'tenant', tenant };
  }
  if (route.mutating) {
    checkBearer(authorization, options.token);
    return { kind: 'admin' };
  }
  try {
    checkBearer(authorization, options.token);
    return { kind: 'admin' };
  } catch {
    return { kind: 'anonymous' };
  }
}
