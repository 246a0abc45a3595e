import type { IncomingMessage } from 'node:http';
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

/**
 * The request's body parsed as JSON, whatever its shape; undefined when empty. Not JSON, or
 * larger than `maxBytes`: a 400 with `code` naming what was wrong.
 */
export async function readJsonValue(req: IncomingMessage, maxBytes: number, code: 'INVALID_REQUEST' | 'INVALID_PAYLOAD'): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new ApiError(400, code, `the request body is larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ApiError(400, code, `the request body is not JSON: ${(err as Error).message}`);
  }
}
