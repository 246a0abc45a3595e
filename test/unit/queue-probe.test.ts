import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { PROBE_LANES, QueueProbe } from '../../src/runner/shared-channel.js';

/** A channel whose passive declares answer a tick later; it counts how many it has in hand at once. */
class FakeChannel extends EventEmitter {
  inHand = 0;
  most = 0;
  constructor(private readonly missing: ReadonlySet<string>) {
    super();
  }
  async checkQueue(queue: string): Promise<{ messageCount: number }> {
    this.inHand += 1;
    this.most = Math.max(this.most, this.inHand);
    await new Promise((resolve) => setImmediate(resolve));
    this.inHand -= 1;
    if (this.missing.has(queue)) throw Object.assign(new Error(`NOT_FOUND - no queue '${queue}'`), { code: 404 });
    return { messageCount: queue.length };
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

function connection(missing: ReadonlySet<string> = new Set()): { connection: AmqpConnection; channels: FakeChannel[] } {
  const channels: FakeChannel[] = [];
  const fake = {
    createChannel: () => {
      const channel = new FakeChannel(missing);
      channels.push(channel);
      return Promise.resolve(channel);
    },
  };
  return { connection: fake as unknown as AmqpConnection, channels };
}

describe('QueueProbe (passive declares for the members of shared channels)', () => {
  it('asks questions asked at once on PROBE_LANES channels, one at a time on each (a pooled start asks three per tenant)', async () => {
    const { connection: conn, channels } = connection();
    const probe = new QueueProbe();
    probe.attach(conn);
    const queues = Array.from({ length: 4 * PROBE_LANES }, (_, i) => `q${i}`);
    const counts = await Promise.all(queues.map((queue) => probe.messageCount(queue)));
    expect(counts).to.deep.equal(queues.map((queue) => queue.length));
    expect(channels).to.have.length(PROBE_LANES);
    // amqplib queues RPCs of one channel one after the other: more in hand on one would only wait there.
    expect(channels.every((channel) => channel.most <= 4)).to.equal(true);
    await probe.close();
  });

  it('answers undefined for a missing queue, and asks the next question on that lane on a new channel (the 404 closed it)', async () => {
    const { connection: conn, channels } = connection(new Set(['gone']));
    const probe = new QueueProbe(1);
    probe.attach(conn);
    expect(await probe.messageCount('gone')).to.equal(undefined);
    expect(await probe.messageCount('here')).to.equal(4);
    expect(channels).to.have.length(2);
    await probe.close();
  });
});
