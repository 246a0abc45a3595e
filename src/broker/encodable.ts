import type { Options } from 'amqplib';
import { AMQPLIB_HEADER_BYTES, headerBytes, SHORTSTR_BYTES } from '../job/wire-limits.js';

/** The message properties AMQP 0-9-1 carries as short strings (at most 255 bytes each). */
const SHORT_PROPERTIES = [
  'contentType',
  'contentEncoding',
  'correlationId',
  'replyTo',
  'expiration',
  'messageId',
  'type',
  'userId',
  'appId',
] as const;

/**
 * Why amqplib could not encode a message with these fields, or undefined when it can. Checked
 * before a publish reaches the channel: amqplib throws on such a message only after queueing its
 * confirm callback, which leaves every later confirm of the channel one slot off, so the channel
 * would have to be retired for every publisher sharing it. Refused here, the message fails alone.
 */
export function unencodable(exchange: string, routingKey: string, options: Options.Publish): string | undefined {
  if (tooLong(exchange)) return `the exchange name is longer than ${SHORTSTR_BYTES} bytes`;
  if (tooLong(routingKey)) return `the routing key is longer than ${SHORTSTR_BYTES} bytes`;
  for (const name of SHORT_PROPERTIES) {
    const value = options[name] as unknown;
    if (typeof value === 'string' && tooLong(value)) return `the "${name}" property is longer than ${SHORTSTR_BYTES} bytes`;
  }
  const headers = options.headers as Record<string, unknown> | undefined;
  if (headers === undefined) return undefined;
  for (const name in headers) if (tooLong(name)) return `header name "${name.slice(0, 40)}..." is longer than ${SHORTSTR_BYTES} bytes`;
  const bytes = headerBytes(headers);
  return bytes > AMQPLIB_HEADER_BYTES
    ? `its headers take ${bytes} bytes, more than the ${AMQPLIB_HEADER_BYTES} amqplib encodes`
    : undefined;
}

/** UTF-8 takes at most 3 bytes per UTF-16 unit, so a short string needs no count. */
function tooLong(text: string): boolean {
  return text.length * 3 > SHORTSTR_BYTES && Buffer.byteLength(text) > SHORTSTR_BYTES;
}
