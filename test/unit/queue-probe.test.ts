import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { PROBE_LANES, QueueProbe } from '../../src/runner/channels/shared-channel.js';

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

/**
 * A channel as amqplib and the broker make it: one question answered at a time, the others
 * waiting; a 404 closes it, and every question still waiting on it fails ("Channel ended").
 */
class BrokerLikeChannel extends EventEmitter {
  closed = false;
  asked = 0;
  private turn: Promise<unknown> = Promise.resolve();
  constructor(private readonly missing: ReadonlySet<string>) {
    super();
  }
  checkQueue(queue: string): Promise<{ messageCount: number }> {
    if (this.closed) return Promise.reject(new Error('Channel closed'));
    this.asked += 1;
    const answer = this.turn.then(async () => {
      if (this.closed) throw new Error('Channel ended, no reply will be forthcoming');
      await new Promise((resolve) => setImmediate(resolve));
      if (this.missing.has(queue)) {
        this.closed = true;
        setImmediate(() => this.emit('close'));
        throw Object.assign(new Error(`NOT_FOUND - no queue '${queue}'`), { code: 404 });
      }
      return { messageCount: queue.length };
    });
    this.turn = answer.catch(() => undefined);
    return answer;
  }
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}

function brokerLike(missing: ReadonlySet<string>): { connection: AmqpConnection; channels: BrokerLikeChannel[] } {
  const channels: BrokerLikeChannel[] = [];
  const fake = {
    createChannel: () => {
      const channel = new BrokerLikeChannel(missing);
      channels.push(channel);
      return Promise.resolve(channel);
    },
  };
  return { connection: fake as unknown as AmqpConnection, channels };
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

  it('asks about queues that may be missing on lanes of their own, one question at a time: their 404s fail no other question', async () => {
    const missing = new Set(['suspect.a', 'suspect.c']);
    const { connection: conn, channels } = brokerLike(missing);
    const probe = new QueueProbe(1, 2);
    probe.attach(conn);
    // Questions about queues that exist, on the one lane for them, beside suspects that mostly do not.
    const known = ['work.a', 'work.b', 'work.c', 'due.a'];
    const uncertain = ['suspect.a', 'suspect.b', 'suspect.c', 'suspect.d', 'suspect.a'];
    const [counts, suspects] = await Promise.all([
      Promise.all(known.map((queue) => probe.messageCount(queue))),
      Promise.all(uncertain.map((queue) => probe.messageCount(queue, { mayBeMissing: true }))),
    ]);
    expect(counts).to.deep.equal(known.map((queue) => queue.length));
    expect(suspects).to.deep.equal([undefined, 9, undefined, 9, undefined]);
    // The lane for existing queues kept its one channel; each 404 closed a channel of the uncertain lanes.
    expect(channels[0].asked).to.equal(known.length);
    expect(channels[0].closed).to.equal(false);
    expect(channels.filter((channel) => channel.closed)).to.have.length(3);
    await probe.close();
  });
});
