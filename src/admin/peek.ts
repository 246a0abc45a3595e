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
