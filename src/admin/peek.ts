import type { Channel, GetMessage } from 'amqplib';

/**
 * Reads up to `limit` of the messages in `queue` now, without acknowledging them: closing the
 * channel hands them all back, in order. For looking at a queue without consuming it.
 */
export async function peek(channel: Channel, queue: string, limit: number): Promise<GetMessage[]> {
  const { messageCount } = await channel.checkQueue(queue);
  const taken: GetMessage[] = [];
  for (let i = 0; i < Math.min(limit, messageCount); i++) {
    const message = await channel.get(queue, { noAck: false });
    if (message === false) break;
    taken.push(message);
  }
  return taken;
}

let reading: Promise<unknown> = Promise.resolve();

/**
 * Runs `read` when no other read of this process that holds messages unacknowledged (a peek, a
 * listing, a retry or replay that gets messages one by one) is under way, and holds off the next
 * until it is done. Two at once take each other's messages: a peek finds the queue empty, a
 * retry moves nothing, because the other holds them until its channel closes. The admin server
 * (API and dashboard, whose pages refresh every few seconds) is one process: within it they
 * never overlap. Another process (a `stagecoach dead retry` in a terminal) still can.
 */
export function exclusiveRead<T>(read: () => Promise<T>): Promise<T> {
  const result = reading.then(read, read);
  reading = result.catch(() => undefined);
  return result;
}
