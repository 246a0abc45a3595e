import { expect } from 'chai';
import type { Channel, ConsumeMessage } from 'amqplib';
import { ConsumerSource } from '../../src/runner/channels/consumer-source.js';

interface Settlement {
  op: 'ack' | 'nack';
  tag: number;
  allUpTo: boolean;
  requeue?: boolean;
}

/** The two amqplib Channel methods ConsumerSource settles with, recorded. */
class RecordingChannel {
  readonly calls: Settlement[] = [];
  /** Makes ack() throw, as amqplib does once the channel has closed. */
  failing = false;

  ack(message: ConsumeMessage, allUpTo = false): void {
    if (this.failing) throw new Error('Channel closed');
    this.calls.push({ op: 'ack', tag: message.fields.deliveryTag, allUpTo });
  }

  nack(message: ConsumeMessage, allUpTo = false, requeue = true): void {
    this.calls.push({ op: 'nack', tag: message.fields.deliveryTag, allUpTo, requeue });
  }
}

/**
 * The broker's view of one channel: delivery tags unsettled, and which of them the test still
 * has "in a handler". Applying settlements checks the AMQP rules ConsumerSource must keep: every
 * tag settled once, and an ack with allUpTo never covering a delivery still being worked on.
 */
class BrokerView {
  private readonly unsettled = new Set<number>();
  readonly working = new Set<number>();

  deliver(tag: number): void {
    this.unsettled.add(tag);
    this.working.add(tag);
  }

  apply(settlements: readonly Settlement[]): void {
    for (const s of settlements) {
      expect(this.unsettled.has(s.tag), `${s.op} of tag ${s.tag}, which is not unsettled`).to.equal(true);
      const covered = s.allUpTo ? [...this.unsettled].filter((t) => t <= s.tag) : [s.tag];
      for (const tag of covered) {
        expect(this.working.has(tag), `${s.op}(${s.tag}, allUpTo=${s.allUpTo}) covers tag ${tag}, still being worked on`).to.equal(false);
        this.unsettled.delete(tag);
      }
    }
  }

  get remaining(): number[] {
    return [...this.unsettled].sort((a, b) => a - b);
  }
}

const message = (tag: number): ConsumeMessage =>
  ({
    fields: { deliveryTag: tag, redelivered: false },
    properties: { headers: {} },
    content: Buffer.alloc(0),
  }) as unknown as ConsumeMessage;

/** Lets the batched acknowledgements of the current turn go out. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function setup(count: number): { source: ConsumerSource; channel: RecordingChannel; messages: ConsumeMessage[] } {
  const channel = new RecordingChannel();
  const source = new ConsumerSource(channel as unknown as Channel);
  const messages = Array.from({ length: count }, (_, i) => message(i + 1));
  for (const m of messages) source.delivered(m);
  return { source, channel, messages };
}

/** Deterministic PRNG (mulberry32), so that a failing order can be replayed from its seed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('ConsumerSource ack batching', () => {
  it('sends nothing until the turn ends, then one ack(last, allUpTo) for in-order completions', async () => {
    const { source, channel, messages } = setup(4);
    for (const m of messages) source.ack(m);
    expect(channel.calls, 'batched to the end of the turn').to.deep.equal([]);
    await nextTurn();
    expect(channel.calls).to.deep.equal([{ op: 'ack', tag: 4, allUpTo: true }]);
  });

  it('acks in-order completions of a prefix with one allUpTo while later deliveries are still worked on', async () => {
    const { source, channel, messages } = setup(5);
    source.ack(messages[1]);
    source.ack(messages[0]);
    source.ack(messages[2]);
    await nextTurn();
    expect(channel.calls, 'tags 4 and 5 are still outstanding, but above 3').to.deep.equal([{ op: 'ack', tag: 3, allUpTo: true }]);
  });

  it('acks one by one when an earlier delivery is still being worked on, never with an allUpTo covering it', async () => {
    const { source, channel, messages } = setup(4);
    source.ack(messages[1]);
    source.ack(messages[3]);
    await nextTurn();
    expect(channel.calls, 'tags 1 and 3 still in handlers').to.deep.equal([
      { op: 'ack', tag: 2, allUpTo: false },
      { op: 'ack', tag: 4, allUpTo: false },
    ]);
    // The stragglers finish: what is outstanding now is exactly {1, 3}, so one allUpTo settles both.
    source.ack(messages[2]);
    source.ack(messages[0]);
    await nextTurn();
    expect(channel.calls.slice(2)).to.deep.equal([{ op: 'ack', tag: 3, allUpTo: true }]);
  });

  it('acks the part of a batch below the lowest delivery still worked on with one allUpTo, the rest one by one', async () => {
    const { source, channel, messages } = setup(6);
    for (const i of [0, 1, 2, 5]) source.ack(messages[i] as ConsumeMessage);
    await nextTurn();
    expect(channel.calls, 'tags 4 and 5 still in handlers').to.deep.equal([
      { op: 'ack', tag: 3, allUpTo: true },
      { op: 'ack', tag: 6, allUpTo: false },
    ]);
  });

  it('sends a reject (nack without requeue) at once and forgets its tag, so that later completions still ack with one allUpTo', async () => {
    const { source, channel, messages } = setup(3);
    source.reject(messages[0]);
    expect(channel.calls, 'not batched').to.deep.equal([{ op: 'nack', tag: 1, allUpTo: false, requeue: false }]);
    source.ack(messages[1]);
    source.ack(messages[2]);
    await nextTurn();
    expect(channel.calls.slice(1), 'tag 1 is no longer outstanding').to.deep.equal([{ op: 'ack', tag: 3, allUpTo: true }]);
  });

  it('never requeues, and forgets a rejected tag in the middle', async () => {
    const { source, channel, messages } = setup(3);
    source.reject(messages[1]);
    source.ack(messages[0]);
    source.ack(messages[2]);
    await nextTurn();
    expect(channel.calls).to.deep.equal([
      { op: 'nack', tag: 2, allUpTo: false, requeue: false },
      { op: 'ack', tag: 3, allUpTo: true },
    ]);
  });

  it('ignores a second settlement of the same delivery: no ack covers a delivery still in a handler', async () => {
    const { source, channel, messages } = setup(3);
    source.ack(messages[1]);
    source.ack(messages[1]);
    await nextTurn();
    expect(channel.calls, 'tag 1 is still in a handler').to.deep.equal([{ op: 'ack', tag: 2, allUpTo: false }]);
    source.ack(messages[2]);
    source.reject(messages[2]);
    await nextTurn();
    expect(channel.calls.slice(1), 'acked once, the reject ignored').to.deep.equal([{ op: 'ack', tag: 3, allUpTo: false }]);
  });

  it('abandon() drops the pending acknowledgements and sends nothing, not even nacks', async () => {
    const { source, channel, messages } = setup(3);
    source.ack(messages[0]);
    source.ack(messages[1]);
    source.abandon();
    expect(source.closed).to.equal(true);
    await nextTurn();
    source.ack(messages[2]);
    source.reject(messages[2]);
    source.flush();
    await nextTurn();
    expect(channel.calls).to.deep.equal([]);
  });

  it('flush() sends what was gathered at once, and the end of the turn then sends nothing twice', async () => {
    const { source, channel, messages } = setup(2);
    source.ack(messages[0]);
    source.ack(messages[1]);
    source.flush();
    expect(channel.calls).to.deep.equal([{ op: 'ack', tag: 2, allUpTo: true }]);
    await nextTurn();
    expect(channel.calls).to.have.length(1);
  });

  it('flush() on a closed source sends nothing', async () => {
    const { source, channel, messages } = setup(2);
    source.ack(messages[0]);
    source.closed = true;
    source.flush();
    await nextTurn();
    expect(channel.calls).to.deep.equal([]);
  });

  it('swallows an ack that throws because the channel closed under it', async () => {
    const { source, channel, messages } = setup(2);
    channel.failing = true;
    source.ack(messages[1]);
    expect(() => source.flush()).not.to.throw();
    source.ack(messages[0]);
    await nextTurn();
    expect(channel.calls).to.deep.equal([]);
  });

  it('settles every delivery exactly once, never covering one in a handler, whatever the order of completions', async () => {
    for (let seed = 1; seed <= 200; seed++) {
      const next = random(seed);
      const count = 1 + Math.floor(next() * 24);
      const { source, channel, messages } = setup(count);
      const broker = new BrokerView();
      for (const m of messages) broker.deliver(m.fields.deliveryTag);
      // Handlers finish in a random order, spread over random turns; some jobs are nacked.
      const order = [...messages];
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [order[i], order[j]] = [order[j], order[i]];
      }
      let sent = 0;
      for (const m of order) {
        broker.working.delete(m.fields.deliveryTag);
        if (next() < 0.15) source.reject(m);
        else source.ack(m);
        // Now and then the same delivery is settled twice: the second must change nothing.
        if (next() < 0.1) source.ack(m);
        if (next() < 0.3) {
          await nextTurn();
          broker.apply(channel.calls.slice(sent));
          sent = channel.calls.length;
        }
      }
      await nextTurn();
      broker.apply(channel.calls.slice(sent));
      expect(broker.remaining, `seed ${seed}: unsettled deliveries`).to.deep.equal([]);
    }
  });
});
