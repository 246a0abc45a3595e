import { expect } from 'chai';
import type { ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import type { Bucket } from '../../src/flow/bucket.js';
import { TokenSource, type Token } from '../../src/flow/token-source.js';
import type { Logger } from '../../src/logging/logger.js';

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;

/**
 * A broker's token queue as one channel sees it: per-consumer prefetch, unacknowledged
 * deliveries counted against the consumer that received them, nack with requeue redelivering
 * to whoever has room. Like amqplib, it may run a consumer's first deliveries before the promise
 * of `consume` has resumed its caller: the broker sends `basic.deliver` right after
 * `basic.consume-ok`, in the same read from the socket.
 */
class FakeTokenChannel {
  ready: number;
  readonly unacked = new Map<number, string>();
  starts = 0;
  private prefetchNext = 0;
  private tag = 0;
  private readonly consumers = new Map<string, { limit: number; onMessage: (message: ConsumeMessage | null) => void }>();

  constructor(tokens: number) {
    this.ready = tokens;
  }

  on(): void {}
  async prefetch(count: number): Promise<void> {
    this.prefetchNext = count;
  }
  async consume(_queue: string, onMessage: (message: ConsumeMessage | null) => void): Promise<{ consumerTag: string }> {
    const consumerTag = `c${++this.starts}`;
    this.consumers.set(consumerTag, { limit: this.prefetchNext, onMessage });
    this.deliver();
    return { consumerTag };
  }
  async cancel(consumerTag: string): Promise<void> {
    this.consumers.delete(consumerTag);
  }
  async checkQueue(): Promise<{ messageCount: number; consumerCount: number }> {
    return { messageCount: this.ready, consumerCount: this.consumers.size };
  }
  nack(message: ConsumeMessage): void {
    this.settle(message);
    this.ready++;
    this.deliver();
  }
  reject(message: ConsumeMessage): void {
    this.settle(message);
  }
  async close(): Promise<void> {}

  private settle(message: ConsumeMessage): void {
    if (!this.unacked.delete(message.fields.deliveryTag)) throw new Error(`unknown delivery tag ${message.fields.deliveryTag}`);
  }

  private deliver(): void {
    for (const [consumerTag, consumer] of this.consumers) {
      const inHand = (): number => [...this.unacked.values()].filter((tag) => tag === consumerTag).length;
      while (this.ready > 0 && inHand() < consumer.limit) {
        this.ready--;
        const deliveryTag = ++this.tag;
        this.unacked.set(deliveryTag, consumerTag);
        consumer.onMessage({ fields: { deliveryTag, consumerTag }, properties: {}, content: Buffer.alloc(0) } as unknown as ConsumeMessage);
      }
    }
  }
}

async function eventually(condition: () => boolean, what: string, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('TokenSource', () => {
  const bucket: Bucket = { id: 'ocr.concurrency', partition: 'ocr', strategy: 'concurrency', size: 10 };
  let source: TokenSource;
  afterEach(() => source.close());

  it('replaces a consumer whose first token came before its consume-ok was answered, once it was sent all it may be: jobs still waiting get theirs', async () => {
    const channel = new FakeTokenChannel(10);
    source = new TokenSource('t', silent, async () => undefined);
    await source.attach({ createChannel: async () => channel } as unknown as AmqpConnection);
    const held: Token[] = [];
    // One job asks alone: a consumer allowed one token starts, and its token comes at once.
    source.take(bucket, (token) => held.push(token));
    await eventually(() => held.length === 1, 'the first job granted');
    // Four more wait: that consumer may be sent nothing more, so another must start for them.
    for (let i = 0; i < 4; i++) source.take(bucket, (token) => held.push(token));
    await eventually(() => held.length === 5, `the four others granted (granted ${held.length}, consumers started ${channel.starts})`);
    expect(channel.unacked.size).to.equal(5);
  });

  it('hands a freed token straight to the next job, past the reuse quantum, while no other process waits for the bucket', async () => {
    // Two tokens, both taken: the broker has none ready, and only this process consumes.
    const channel = new FakeTokenChannel(2);
    source = new TokenSource('t', silent, async () => undefined);
    await source.attach({ createChannel: async () => channel } as unknown as AmqpConnection);
    const held: Token[] = [];
    source.take(bucket, (token) => held.push(token));
    source.take(bucket, (token) => held.push(token));
    await eventually(() => held.length === 2, 'both granted');
    // Past the quantum, and past the contention check that runs every quantum.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    source.take(bucket, (token) => held.push(token));
    const freed = held.shift() as Token;
    source.release(freed);
    await eventually(() => held.length === 2, 'the waiting job granted');
    expect(held[1].message.fields.deliveryTag).to.equal(
      freed.message.fields.deliveryTag,
      'the same token, not one sent back and delivered again',
    );
  });
});
