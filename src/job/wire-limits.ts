import type { HeaderValue } from './job.types.js';

/**
 * What a message stagecoach publishes again (a retry, a suspect or hand-back copy, a park, a
 * dead letter) can carry. amqplib encodes a message's headers in one 64 KiB buffer: headers
 * larger than that fail inside the client (the publish throws and the channel is retired), and
 * the message is never sent. A delivery whose own headers leave less than REPUBLISH_HEADROOM
 * bytes of room could therefore not be republished by any route: it is refused on receipt
 * (INVALID_PAYLOAD), and its dead letter keeps only the headers that fit.
 */
export const AMQPLIB_HEADER_BYTES = 64 * 1024;
/** An AMQP short string (a property such as `type`, a header name, a routing key): at most this many bytes. */
export const SHORTSTR_BYTES = 255;
/** Room kept for the headers a route adds (the error, the origin, the stage, the time). */
export const REPUBLISH_HEADROOM = 4 * 1024;
/** The largest headers a delivery may carry in: bytes, as amqplib encodes them (an upper bound). */
export const MAX_INCOMING_HEADER_BYTES = AMQPLIB_HEADER_BYTES - REPUBLISH_HEADROOM;

/**
 * JSON nested deeper than this is refused on receipt (INVALID_PAYLOAD): V8's `JSON.stringify`
 * recurses per level and runs out of stack a few thousand levels down, so such a job could be
 * parsed and run but never published again (not as a retry, not as a dead letter).
 */
export const MAX_JSON_DEPTH = 512;

/**
 * An upper bound of the bytes amqplib takes to encode `headers` as an AMQP field table (every
 * number counted as 9 bytes, the widest). Linear in the headers, no allocation.
 */
export function headerBytes(headers: Readonly<Record<string, unknown>> | undefined): number {
  if (headers === undefined) return 4;
  let bytes = 4;
  for (const key in headers) {
    const value = headers[key];
    if (value !== undefined) bytes += 1 + Buffer.byteLength(key) + valueBytes(value);
  }
  return bytes;
}

/** The encoded size of one header (name and value). */
export function headerEntryBytes(name: string, value: HeaderValue | unknown): number {
  return value === undefined ? 0 : 1 + Buffer.byteLength(name) + valueBytes(value);
}

function valueBytes(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return 5 + Buffer.byteLength(value);
    case 'number':
    case 'bigint':
      return 9;
    case 'boolean':
      return 2;
    case 'object': {
      if (value === null) return 1;
      if (Buffer.isBuffer(value)) return 5 + value.length;
      if (value instanceof Date) return 9;
      if (Array.isArray(value)) {
        let bytes = 5;
        for (const item of value) bytes += valueBytes(item);
        return bytes;
      }
      return 1 + headerBytes(value as Record<string, unknown>);
    }
    default:
      return 1;
  }
}

/**
 * Whether `value` holds arrays or objects nested deeper than `max` levels. Iterative: it must
 * not itself run out of stack on the input it guards against; it stops at the first too-deep
 * branch.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<{ node: unknown; depth: number }> = [{ node: value, depth: 0 }];
  while (stack.length > 0) {
    const { node, depth } = stack.pop() as { node: unknown; depth: number };
    if (typeof node !== 'object' || node === null) continue;
    if (depth + 1 > max) return true;
    const children = Array.isArray(node) ? node : Object.values(node as Record<string, unknown>);
    for (const child of children) if (typeof child === 'object' && child !== null) stack.push({ node: child, depth: depth + 1 });
  }
  return false;
}
