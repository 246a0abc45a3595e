import { createHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from './api-error.js';

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
