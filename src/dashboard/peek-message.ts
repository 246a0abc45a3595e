import type { GetMessage } from 'amqplib';
import { exclusiveRead, peek } from '../broker/peek.js';
import { openConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { loadPayloadInfo, type LoadedPayloadInfo } from '../payload/payload-info.js';
import type { PayloadStore } from '../payload/payload-store.js';
import { MessageNotFoundError } from './dashboard-errors.js';
import { messageRef, positionOf } from './message-ref.js';

/** The most of a body the dashboard shows: a page is no place for a 100 MB payload. */
export const MAX_BODY_BYTES = 256 * 1024;

/** How far into a queue a reference is looked for. */
export const MAX_SCAN = 1000;

/** One message as the dashboard shows it on demand: its properties, headers and body. */
export interface PeekedMessage {
  ref: string;
  /** The physical queue it sits in. */
  queue: string;
  position: number;
  message_id: string | null;
  type: string | null;
  content_type: string | null;
  /** `timestamp` of the message (a job's created_at), ISO 8601. */
  timestamp: string | null;
  headers: Record<string, unknown>;
  /** The body as text (UTF-8), cut at {@link MAX_BODY_BYTES}. */
  body: string;
  /** The body parsed, when it is JSON and was not cut. */
  body_json?: unknown;
  size: number;
  truncated: boolean;
  /**
   * A job sent by reference (`x-ojs-payload-ref`): its payload loaded back from the store, so the
   * operator sees the arguments the body lacks. `args` when stored and at most
   * {@link MAX_BODY_BYTES}; `truncated` when larger; `stored: false` when the store has it no more.
   */
  payload?: LoadedPayloadInfo;
}

/**
 * Finds one message of `queue` by reference (see message-ref.ts) among its first
 * {@link MAX_SCAN} and returns a copy; every message read is handed back, in order, when the
 * channel closes, so looking never consumes. A job sent by reference gets its arguments from
 * `payloads`, looked up once the message was handed back.
 *
 * @throws MessageNotFoundError when it is not there (any more).
 */
export async function peekMessage(
  config: CompiledConfig,
  log: Logger,
  queue: string,
  ref: string,
  payloads: PayloadStore,
): Promise<PeekedMessage> {
  const shown = await exclusiveRead(config, log, () => peekOne(config, log, queue, ref));
  const payload = await loadPayloadInfo(shown.headers, payloads, MAX_BODY_BYTES);
  return payload === undefined ? shown : { ...shown, payload };
}

async function peekOne(config: CompiledConfig, log: Logger, queue: string, ref: string): Promise<PeekedMessage> {
  const position = positionOf(ref);
  const connection = await openConnection(config, log, 'stagecoach-dashboard');
  try {
    const channel = await connection.createChannel();
    const messages = await peek(channel, queue, position === undefined ? MAX_SCAN : position + 1);
    const index = position ?? messages.findIndex((message) => message.properties.messageId === ref);
    const found = index >= 0 ? messages[index] : undefined;
    // A position names whatever sits there now: it must still be a message without an id.
    if (found === undefined || (position !== undefined && messageRef(str(found.properties.messageId), index) !== ref)) {
      await channel.close();
      throw new MessageNotFoundError(queue, ref);
    }
    const shown = describe(queue, found, index);
    await channel.close();
    return shown;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

function describe(queue: string, message: GetMessage, position: number): PeekedMessage {
  const { properties, content } = message;
  const truncated = content.length > MAX_BODY_BYTES;
  const body = content.subarray(0, MAX_BODY_BYTES).toString('utf8');
  let parsed: { value: unknown } | undefined;
  if (!truncated) {
    try {
      parsed = { value: JSON.parse(body) as unknown };
    } catch {
      parsed = undefined; // not JSON: shown as text
    }
  }
  const messageId = str(properties.messageId);
  const timestamp: unknown = properties.timestamp;
  return {
    ref: messageRef(messageId, position),
    queue,
    position,
    message_id: messageId ?? null,
    type: str(properties.type) ?? null,
    content_type: str(properties.contentType) ?? null,
    timestamp: typeof timestamp === 'number' ? new Date(timestamp * 1000).toISOString() : null,
    headers: plain(properties.headers ?? {}) as Record<string, unknown>,
    body,
    ...(parsed === undefined ? {} : { body_json: parsed.value }),
    size: content.length,
    truncated,
  };
}

/** Header values as JSON can carry them: byte strings as text, nested tables and arrays alike. */
function plain(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([key, inner]) => [key, plain(inner)]));
  }
  return typeof value === 'bigint' ? value.toString() : value;
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
