import type { IncomingMessage } from 'node:http';
import { uuidv7 } from '../job/uuid-v7.js';

/**
 * A client's own `X-Request-Id` is kept when it is printable ASCII of at most this many
 * characters (binding 19.2); anything else is replaced by one of ours, so a log line or an error
 * body never carries what a client could use to forge another line.
 */
const CLIENT_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * The id of one request (spec/ojs-http-binding.md section 19): the client's `X-Request-Id` when
 * it sent a usable one, else `req_<UUIDv7>`. Sent back as `X-Request-Id` on every answer and as
 * `error.request_id` in every error body.
 */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  const value = Array.isArray(given) ? given[0] : given;
  return value !== undefined && CLIENT_REQUEST_ID.test(value) ? value : `req_${uuidv7()}`;
}
