import type { Channel } from 'amqplib';
import { StagecoachError } from '../errors/errors.js';

/**
 * `queue.delete` with `if-empty`, on either queue type. RabbitMQ before 4.0 refuses `if-empty`
 * on a quorum queue with NOT_IMPLEMENTED, a connection-level error that would take the caller's
 * connection down with it. A quorum queue is therefore counted first and deleted only when it
 * holds nothing: not atomic, so callers cut the queue's inflow (its bindings) beforehand, as the
 * removals do, and check that it has no consumer.
 *
 * @returns the messages the broker reports deleted (0 unless it raced).
 * @throws StagecoachError QUEUE_NOT_EMPTY when a quorum queue still holds jobs; the broker's
 *   PRECONDITION_FAILED for a classic one.
 */
export async function deleteIfEmpty(channel: Channel, queue: string, quorum: boolean): Promise<number> {
  if (!quorum) return (await channel.deleteQueue(queue, { ifEmpty: true })).messageCount;
  const { messageCount } = await channel.checkQueue(queue);
  if (messageCount > 0) {
    throw new StagecoachError('CONFLICT', `queue "${queue}" is not empty (${messageCount} job${messageCount === 1 ? '' : 's'})`);
  }
  return (await channel.deleteQueue(queue)).messageCount;
}
