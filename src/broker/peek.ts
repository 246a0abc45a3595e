import type { Channel, GetMessage } from 'amqplib';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { withReadLock } from './read-lock.js';

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
 * Runs `read` when no other read that holds messages unacknowledged (a peek, a listing, a retry
 * or replay that gets messages one by one) is under way, and holds off the next until it is done.
 * Two at once take each other's messages: a peek finds the queue empty, a retry moves nothing,
 * because the other holds them until its channel closes. Within a process (the admin server: API
 * and dashboard, whose pages refresh every few seconds) they queue up here; across processes (a
 * `stagecoach dead retry` in a terminal beside it) they take the broker's read lock of the prefix
 * (read-lock.ts), which a process holds for one read at a time.
 */
export function exclusiveRead<T>(config: CompiledConfig, log: Logger, read: () => Promise<T>): Promise<T> {
  const locked = (): Promise<T> => withReadLock(config, log, read);
  const result = reading.then(locked, locked);
  reading = result.catch(() => undefined);
  return result;
}
