import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { ConfirmPublisher, READY_CHECK_MS } from '../../src/broker/confirm-publisher.js';
import { PublishError, QueueFullError } from '../../src/errors/errors.js';

/** amqplib's own error class for operations on a closing or closed channel or connection. */
const { IllegalOperationError } = createRequire(import.meta.url)('amqplib/lib/error.js') as {
  IllegalOperationError: new (message: string, stack?: string) => Error;
};

/** amqplib's real confirm channel: its bookkeeping of confirms is what is under test, not a stand-in's. */
const { ConfirmChannel } = createRequire(import.meta.url)('amqplib/lib/channel_model.js') as {
  ConfirmChannel: new (connection: unknown) => EventEmitter & { ch: number };
};

type Confirm = (err: unknown) => void;

/** A ConfirmChannel as far as ConfirmPublisher uses it: publish with a confirm callback, events. */
class FakeConfirmChannel extends EventEmitter {
  readonly sent: Array<{ exchange: string; routingKey: string; confirm: Confirm }> = [];
  /** What publish() returns: false = "buffer full, wait for 'drain'". */
  writable = true;
  /** Thrown synchronously by publish(), as amqplib does on a closing channel. */
  throws: Error | undefined;
  closeCalls = 0;

  publish(exchange: string, routingKey: string, _content: Buffer, _options: unknown, confirm: Confirm): boolean {
    if (this.throws) throw this.throws;
    this.sent.push({ exchange, routingKey, confirm });
    return this.writable;
  }

  waitForConfirms(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closeCalls++;
    // amqplib fails every unconfirmed publish when the channel closes.
    for (const { confirm } of this.sent.splice(0)) confirm(new Error('channel closed'));
    this.emit('close');
    return Promise.resolve();
  }
}

async function open(
  onLost?: () => void,
  onQueueFull?: (refusal: QueueFullError) => void,
): Promise<{ publisher: ConfirmPublisher; channel: FakeConfirmChannel }> {
  const channel = new FakeConfirmChannel();
  const connection = { createConfirmChannel: () => Promise.resolve(channel) } as unknown as AmqpConnection;
  return { publisher: await ConfirmPublisher.open(connection, onLost, onQueueFull), channel };
}

/** Publishes; a rejection is observed at once (and asserted later), so Node does not warn about it. */
const publish = (publisher: ConfirmPublisher, key = 'k'): Promise<void> => {
  const published = publisher.publish('ex', key, Buffer.from('{}'), {});
  published.catch(() => undefined);
  return published;
};

/** Resolves with what `promise` settled to, or 'pending' if it has not settled by the next macrotask. */
async function state(promise: Promise<unknown>): Promise<'fulfilled' | 'pending' | unknown> {
  let result: unknown = 'pending';
  promise.then(
    () => (result = 'fulfilled'),
    (err: unknown) => (result = err),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return result;
}

async function rejection(promise: Promise<unknown>): Promise<PublishError> {
  const outcome = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(outcome, 'a PublishError').to.be.instanceOf(PublishError);
  return outcome as PublishError;
}

describe('ConfirmPublisher', () => {
  it('resolves on the ack and rejects on a nack: a nack naming a closed channel is transient, another is QUEUE_FULL', async () => {
    const { publisher, channel } = await open();
    const acked = publish(publisher, 'a');
    const lost = publish(publisher, 'b');
    const refused = publish(publisher, 'c');
    channel.sent[0].confirm(null);
    channel.sent[1].confirm(new Error('channel closed'));
    channel.sent[2].confirm(new Error('message nacked'));
    expect(await state(acked)).to.equal('fulfilled');
    const transient = await rejection(lost);
    expect(transient).to.include({ transient: true, exchange: 'ex', routingKey: 'b', code: 'PUBLISH_FAILED' });
    const permanent = await rejection(refused);
    expect(permanent).to.be.instanceOf(QueueFullError);
    expect(permanent).to.include({ transient: false, routingKey: 'c', code: 'QUEUE_FULL' });
    expect(permanent.message).to.contain('is full');
  });

  it("names the refused job's queue and tenant from its headers and tells the observer before rejecting", async () => {
    const seen: QueueFullError[] = [];
    const { publisher, channel } = await open(undefined, (refusal) => seen.push(refusal));
    const refused = publisher.publish('p.root', 'conversions', Buffer.from('{}'), {
      headers: { 'x-ojs-queue': 'conversions', 'x-ojs-tenant': 'acme', mime: 'application/pdf' },
    });
    refused.catch(() => undefined);
    channel.sent[0].confirm(new Error('message nacked'));
    const err = (await rejection(refused)) as QueueFullError;
    expect(err).to.include({ code: 'QUEUE_FULL', queue: 'conversions', tenant: 'acme', exchange: 'p.root' });
    expect(err.headers).to.include({ mime: 'application/pdf' });
    expect(err.message).to.equal(
      'queue "conversions" of tenant "acme" is full (QUEUE_FULL: max_size reached, overflow_policy reject): the broker refused the job, nothing was enqueued',
    );
    expect(seen).to.deep.equal([err]);
  });

  it("treats publish() returning false as 'wait for drain': later publishes wait, nothing fails", async () => {
    const { publisher, channel } = await open();
    channel.writable = false;
    const first = publish(publisher, 'first');
    const second = publish(publisher, 'second');
    const third = publish(publisher, 'third');
    expect(
      channel.sent.map((s) => s.routingKey),
      'only the first reached the channel',
    ).to.deep.equal(['first']);
    channel.sent[0].confirm(null);
    expect(await state(first), 'the buffered message is still confirmed').to.equal('fulfilled');
    expect(await state(second)).to.equal('pending');

    channel.writable = true;
    channel.emit('drain');
    await new Promise((resolve) => setImmediate(resolve));
    expect(channel.sent.map((s) => s.routingKey)).to.deep.equal(['first', 'second', 'third']);
    channel.sent[1].confirm(null);
    channel.sent[2].confirm(null);
    expect([await state(second), await state(third)]).to.deep.equal(['fulfilled', 'fulfilled']);
    expect(publisher.isOpen).to.equal(true);
  });

  for (const message of ['Channel closed', 'Channel closing', 'Connection closing']) {
    it(`turns a synchronous "${message}" throw from channel.publish into a transient PublishError`, async () => {
      const { publisher, channel } = await open();
      channel.throws = new IllegalOperationError(message);
      const err = await rejection(publish(publisher, 'x'));
      expect(err).to.include({ transient: true, exchange: 'ex', routingKey: 'x' });
      expect(err.message).to.contain(message);
      expect(err.cause).to.equal(channel.throws);
    });
  }

  it('after a synchronous "Channel closing", fails later publishes fast as transient without calling the channel', async () => {
    const { publisher, channel } = await open();
    channel.throws = new IllegalOperationError('Channel closing');
    await rejection(publish(publisher));
    expect(publisher.isOpen).to.equal(false);
    let calls = 0;
    channel.publish = () => {
      calls++;
      throw new Error('must not be called');
    };
    const err = await rejection(publish(publisher));
    expect(err.transient).to.equal(true);
    expect(calls).to.equal(0);
  });

  it("rejects publishes released by 'drain' into a closing channel as transient, leaving no drain pending", async () => {
    const { publisher, channel } = await open();
    channel.writable = false;
    const first = publish(publisher, 'first');
    const waiting = [publish(publisher, 'w1'), publish(publisher, 'w2')];
    channel.throws = new IllegalOperationError('Channel closing');
    channel.emit('drain');
    for (const w of waiting) expect((await rejection(w)).transient).to.equal(true);
    // Nothing waits for a drain that will never come: a new publish settles at once.
    const after = await state(publish(publisher, 'after'));
    expect(after).to.be.instanceOf(PublishError).and.to.have.property('transient', true);
    expect(await state(first), 'the first is still the broker’s to confirm').to.equal('pending');
  });

  it('retires the channel after a message it could not encode: that publish fails for good, the others as transient', async () => {
    // amqplib registers the confirm callback before encoding: after such a throw its confirm
    // window is one slot ahead of the broker's delivery tags, so the channel cannot be trusted.
    let lost = 0;
    const { publisher, channel } = await open(() => lost++);
    const inFlight = publish(publisher, 'in-flight');
    channel.throws = new TypeError('Unknown type to encode: bigint');
    const bad = await rejection(publish(publisher, 'bad'));
    expect(bad.transient, 'the message itself is at fault').to.equal(false);
    expect(bad.cause).to.be.instanceOf(TypeError);
    expect(channel.closeCalls).to.equal(1);
    expect(lost, 'the owner hears of the lost channel').to.equal(1);
    expect((await rejection(inFlight)).transient).to.equal(true);
    expect((await rejection(publish(publisher, 'later'))).transient).to.equal(true);
  });

  it('calls onLost when the channel closes under it, not after close()', async () => {
    let lost = 0;
    const { publisher, channel } = await open(() => lost++);
    channel.emit('close');
    expect(lost).to.equal(1);
    const other = await open(() => lost++);
    await other.publisher.close();
    other.channel.emit('close');
    expect(lost).to.equal(1);
    expect((await rejection(publish(publisher))).transient).to.equal(true);
  });

  it("fails every unconfirmed publish when amqplib's channel closes, after confirms that came out of order", async () => {
    // amqplib's channel over a connection that takes every frame: the broker's confirms and the
    // channel's close are driven by hand.
    const channel = new ConfirmChannel({ sendMessage: () => true, sendMethod: () => true, releaseChannel: () => undefined });
    channel.ch = 1;
    const connection = { createConfirmChannel: () => Promise.resolve(channel) } as unknown as AmqpConnection;
    const publisher = await ConfirmPublisher.open(connection);
    const [first, second, third] = ['a', 'b', 'c'].map((key) => publish(publisher, key));
    // Two queues confirm at their own pace: the second message before the first.
    channel.emit('ack', { deliveryTag: 2, multiple: false });
    channel.emit('close');
    expect(await state(second)).to.equal('fulfilled');
    expect((await rejection(first)).transient, 'the first, failed by amqplib').to.equal(true);
    // amqplib stops failing at the slot the out-of-order confirm left: this one would wait for ever.
    expect(await state(third), 'the third, behind it').to.not.equal('pending');
    expect((await rejection(third)).transient).to.equal(true);
  });

  it('close() ends when the connection goes while the channel closes', async () => {
    const channel = new ConfirmChannel({
      sendMessage: () => true,
      sendMethod: () => true,
      releaseChannel: () => undefined,
    }) as InstanceType<typeof ConfirmChannel> & { toClosed(stack: string): void };
    channel.ch = 1;
    const connection = { createConfirmChannel: () => Promise.resolve(channel) } as unknown as AmqpConnection;
    const publisher = await ConfirmPublisher.open(connection);
    const closing = publisher.close();
    await new Promise((resolve) => setImmediate(resolve));
    // Its channel.close is sent, unanswered: the connection goes, closing every channel it had.
    channel.toClosed('connection closed');
    expect(await state(closing)).to.equal('fulfilled');
  });

  describe('readyMessages (a refusal checked before it is believed: broker/refusal-cause.ts)', () => {
    /** A channel whose passive declare answers `answer`, or never (undefined) until the channel closes. */
    const probing = (answer: number | undefined) => {
      const probe = new EventEmitter() as EventEmitter & {
        checkQueue(q: string): Promise<{ messageCount: number }>;
        close(): Promise<void>;
      };
      let fail: (err: Error) => void = () => undefined;
      probe.checkQueue = () =>
        answer === undefined ? new Promise((_resolve, reject) => (fail = reject)) : Promise.resolve({ messageCount: answer });
      probe.close = () => {
        fail(new Error('channel closed'));
        return Promise.resolve();
      };
      const connection = {
        createConfirmChannel: () => Promise.resolve(new FakeConfirmChannel()),
        createChannel: () => Promise.resolve(probe),
      } as unknown as AmqpConnection;
      return ConfirmPublisher.open(connection);
    };

    it("reads the queue's ready messages on a channel of its own", async () => {
      expect(await (await probing(12)).readyMessages('q')).to.equal(12);
    });

    it('a broker that does not answer in time gives undefined, and closing the check leaves no unhandled rejection', async function () {
      this.timeout(READY_CHECK_MS + 3000);
      const unhandled: unknown[] = [];
      const listener = (reason: unknown): void => void unhandled.push(reason);
      process.on('unhandledRejection', listener);
      try {
        expect(await (await probing(undefined)).readyMessages('q')).to.equal(undefined);
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(unhandled).to.deep.equal([]);
      } finally {
        process.off('unhandledRejection', listener);
      }
    });
  });
});
