import type { Channel } from 'amqplib';
import { expect } from 'chai';
import { deleteIfEmpty } from '../../src/removal/delete-if-empty.js';

/** A channel that records what was asked of it. */
function fakeChannel(messageCount: number): { channel: Channel; calls: string[] } {
  const calls: string[] = [];
  const channel = {
    deleteQueue: async (queue: string, options?: { ifEmpty?: boolean }) => {
      calls.push(`delete ${queue}${options?.ifEmpty ? ' if-empty' : ''}`);
      return { messageCount: 0 };
    },
    checkQueue: async (queue: string) => {
      calls.push(`check ${queue}`);
      return { queue, messageCount, consumerCount: 0 };
    },
  } as unknown as Channel;
  return { channel, calls };
}

describe('deleteIfEmpty', () => {
  it('asks the broker for if-empty on a classic queue', async () => {
    const { channel, calls } = fakeChannel(0);
    await deleteIfEmpty(channel, 'q', false);
    expect(calls).to.deep.equal(['delete q if-empty']);
  });

  it('never sends if-empty for a quorum queue (RabbitMQ before 4.0 closes the connection): counts, then deletes', async () => {
    const empty = fakeChannel(0);
    await deleteIfEmpty(empty.channel, 'q', true);
    expect(empty.calls).to.deep.equal(['check q', 'delete q']);
    const full = fakeChannel(3);
    let error: Error | undefined;
    await deleteIfEmpty(full.channel, 'q', true).catch((err: Error) => (error = err));
    expect(error?.message).to.match(/not empty \(3 jobs\)/);
    expect(full.calls).to.deep.equal(['check q']);
  });
});
