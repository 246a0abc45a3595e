import type { IncomingMessage } from 'node:http';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../job/wire-limits.js';
import { ApiError } from './api-error.js';

/** The largest request body read: a queue configuration is a few hundred bytes. */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * The request's JSON body as an object; an empty body is `{}`. Anything else (not JSON, not an
 * object, too large) is a 400 naming what was wrong.
 */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const value = (await readJsonValue(req, MAX_BODY_BYTES, 'INVALID_REQUEST')) ?? {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError(400, 'INVALID_REQUEST', 'the request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** JSON media types: `application/json`, the binding's `application/openjobspec+json`, any other `+json`; parameters aside. */
const JSON_MEDIA = /^application\/([a-z0-9.-]+\+)?json$/;

/**
 * The request's body parsed as JSON, whatever its shape; undefined when empty. A body whose
 * `Content-Type` is not JSON (or absent) is a 415; not JSON, nested deeper than any job may be
 * (MAX_JSON_DEPTH), or larger than `maxBytes`: a 400 with `code` naming what was wrong.
 */
export async function readJsonValue(req: IncomingMessage, maxBytes: number, code: 'INVALID_REQUEST' | 'INVALID_PAYLOAD'): Promise<unknown> {
  const declared = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  const media = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (declared && req.headers['content-length'] !== '0' && !JSON_MEDIA.test(media)) {
    req.resume();
    throw new ApiError(
      415,
      'INVALID_REQUEST',
      `the request body must be JSON: send "Content-Type: application/openjobspec+json" or "application/json"${media === '' ? '' : `, not "${media}"`}`,
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new ApiError(400, code, `the request body is larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    throw new ApiError(400, code, `the request body is not JSON: ${(err as Error).message}`);
  }
  // No job nested this deep could be published, retried or dead-lettered (wire-limits.ts).
  if (nestedDeeperThan(value, MAX_JSON_DEPTH))
    throw new ApiError(400, code, `the request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  return value;
}
