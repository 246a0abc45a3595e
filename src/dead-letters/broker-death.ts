import type { ErrorCode } from '../errors/errors.js';

/** The error types of dead letters the broker made itself, by RabbitMQ's dead-lettering reason. */
export type BrokerDeathType = Extract<ErrorCode, 'EXPIRED' | 'QUEUE_FULL' | 'REJECTED' | 'DELIVERY_LIMIT' | 'BROKER_DEAD_LETTER'>;

export interface BrokerDeath {
  type: BrokerDeathType;
  /** Names the queue it died in and why, e.g. "expired in ojs.queue.work.acme (enqueue_ttl 1000 ms)". */
  message: string;
  /** RabbitMQ's reason: `expired`, `maxlen`, `rejected`, `delivery_limit`. */
  reason: string;
  queue: string | undefined;
  /** When the broker dead-lettered it (ISO 8601, whole seconds), if it says. */
  at: string | undefined;
}

/**
 * Why the broker dead-lettered a message, from the `x-death` header it adds: a per-message TTL
 * (`enqueue_ttl`) that ran out, a `drop_oldest` overflow, a reject without requeue (a stage's
 * last resort when it cannot publish the dead letter itself), a quorum queue's delivery limit.
 * Undefined when the broker never dead-lettered it.
 *
 * The most recent death decides: `x-death` lists them newest first, and a retried job carries
 * older ones from the delay ladder (`expired` in `ojs.delay.<k>`). `x-first-death-*` names the
 * oldest, so it is only a fallback for a message without a readable `x-death`.
 */
export function brokerDeath(headers: Readonly<Record<string, unknown>> | undefined): BrokerDeath | undefined {
  if (headers === undefined) return undefined;
  const deaths = headers['x-death'];
  const latest = Array.isArray(deaths) && isRecord(deaths[0]) ? deaths[0] : undefined;
  const reason = text(latest?.reason) ?? text(headers['x-last-death-reason']) ?? text(headers['x-first-death-reason']);
  if (reason === undefined) return undefined;
  const queue = latest ? text(latest.queue) : (text(headers['x-last-death-queue']) ?? text(headers['x-first-death-queue']));
  const where = queue ?? 'an unknown queue';
  const at = timestamp(latest?.time);
  const described = describeReason(reason, where, text(latest?.['original-expiration']));
  return { ...described, reason, queue, at };
}

function describeReason(reason: string, where: string, originalExpiration: string | undefined): Pick<BrokerDeath, 'type' | 'message'> {
  switch (reason) {
    case 'expired':
      // The broker records `original-expiration` only for a per-message TTL; otherwise it was
      // the queue's own `x-message-ttl`.
      return {
        type: 'EXPIRED',
        message: `expired in ${where} (${originalExpiration === undefined ? "the queue's message TTL" : `enqueue_ttl ${originalExpiration} ms`})`,
      };
    case 'maxlen':
      return { type: 'QUEUE_FULL', message: `overflowed in ${where} (max_size reached, overflow_policy drop_oldest)` };
    case 'rejected':
      return { type: 'REJECTED', message: `rejected in ${where} (a stage refused it without a reason it could publish)` };
    case 'delivery_limit':
      return { type: 'DELIVERY_LIMIT', message: `delivery limit reached in ${where} (redelivered too often)` };
    default:
      return { type: 'BROKER_DEAD_LETTER', message: `dead-lettered by the broker in ${where} (reason "${reason}")` };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  // Header strings arrive as Buffers when a producer wrote them as byte arrays.
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return undefined;
}

/** An AMQP timestamp (seconds) as amqplib decodes it: `{ '!': 'timestamp', value }`, or a bare number. */
function timestamp(value: unknown): string | undefined {
  const seconds = isRecord(value) ? value.value : value;
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return undefined;
  return new Date(seconds * 1000).toISOString();
}
