import { expect } from 'chai';
import type { Message } from 'amqplib';
import type { Delivery } from '../../src/runner/channels/delivery.js';
import { Dispatcher } from '../../src/runner/intake/dispatcher.js';
import type { ConsumerSource } from '../../src/runner/channels/consumer-source.js';

/** A promise with its resolve at hand. */
interface Gate {
  promise: Promise<void>;
  open(): void;
}
function gate(): Gate {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open: () => open() };
}

const delivery = (tag: number, priority?: number): Delivery => ({
  message: { fields: { deliveryTag: tag }, properties: { headers: {}, priority }, content: Buffer.alloc(0) } as unknown as Message,
  source: {} as ConsumerSource,
  input: 'main',
  queue: 'ojs.queue.q',
});
const tagOf = (d: Delivery): number => d.message.fields.deliveryTag;

/** Lets promise callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * A Dispatcher whose processing and hand-backs finish when the test says so; it records what
 * started, what was handed back and the highest number in flight seen.
 */
function setup(concurrency: number): {
  dispatcher: Dispatcher;
  started: number[];
  handedBack: number[];
  finish: (tag: number) => void;
  finishHandBack: (tag: number) => void;
  maxInFlight: () => number;
} {
  const started: number[] = [];
  const handedBack: number[] = [];
  const running = new Map<number, Gate>();
  const giving = new Map<number, Gate>();
  let current = 0;
  let max = 0;
  const dispatcher = new Dispatcher({
    concurrency,
    process: async (d) => {
      const g = gate();
      running.set(tagOf(d), g);
      started.push(tagOf(d));
      current++;
      max = Math.max(max, current);
      await g.promise;
      current--;
    },
    handBack: async (d) => {
      const g = gate();
      giving.set(tagOf(d), g);
      handedBack.push(tagOf(d));
      await g.promise;
    },
  });
  const finish = (tag: number): void => {
    const g = running.get(tag);
    if (!g) throw new Error(`delivery ${tag} is not running`);
    g.open();
  };
  const finishHandBack = (tag: number): void => {
    const g = giving.get(tag);
    if (!g) throw new Error(`delivery ${tag} is not being handed back`);
    g.open();
  };
  return { dispatcher, started, handedBack, finish, finishHandBack, maxInFlight: () => max };
}

describe('Dispatcher', () => {
  it('starts the waiting delivery of highest AMQP priority first, first come first served within one', async () => {
    const { dispatcher, started, finish } = setup(1);
    dispatcher.openUp();
    dispatcher.offer(delivery(1, 4));
    // 1 runs; the rest wait for its slot, in priority order whatever order they came in.
    dispatcher.offer(delivery(2, 3));
    dispatcher.offer(delivery(3, 4));
    dispatcher.offer(delivery(4));
    dispatcher.offer(delivery(5, 5));
    for (const tag of [1, 5, 3, 4, 2]) {
      await settle();
      finish(tag);
    }
    await settle();
    expect(started).to.deep.equal([1, 5, 3, 4, 2]);
  });

  it('frees a slot when the handler is done: the next job runs while the last one settles, and idle waits for both', async () => {
    const settlements = new Map<number, Gate>();
    const started: number[] = [];
    const dispatcher = new Dispatcher({
      concurrency: 1,
      process: async (d, handled) => {
        started.push(tagOf(d));
        handled?.();
        const g = gate();
        settlements.set(tagOf(d), g);
        await g.promise;
      },
      handBack: async () => undefined,
    });
    dispatcher.openUp();
    dispatcher.offer(delivery(1));
    dispatcher.offer(delivery(2));
    await settle();
    expect(started, 'the second started while the first waits for its confirms').to.deep.equal([1, 2]);
    expect(dispatcher.inFlight).to.equal(2);
    let idle = false;
    void dispatcher.whenIdle().then(() => (idle = true));
    settlements.get(1)?.open();
    await settle();
    expect(idle, 'one still settling').to.equal(false);
    settlements.get(2)?.open();
    await settle();
    expect(idle).to.equal(true);
  });

  it('starts nothing before openUp(): a closed dispatcher hands arrivals back', async () => {
    const { dispatcher, started, handedBack, finishHandBack } = setup(2);
    dispatcher.offer(delivery(1));
    expect(started).to.deep.equal([]);
    expect(handedBack).to.deep.equal([1]);
    finishHandBack(1);
    expect(await dispatcher.whenIdle(1000)).to.equal(true);
  });

  it('never has more than `concurrency` in flight, and starts in arrival order (FIFO)', async () => {
    const { dispatcher, started, finish, maxInFlight } = setup(3);
    dispatcher.openUp();
    for (let tag = 1; tag <= 10; tag++) dispatcher.offer(delivery(tag));
    expect(started).to.deep.equal([1, 2, 3]);
    expect(dispatcher.inFlight).to.equal(3);
    // Finish out of order: each freed slot takes the oldest waiting delivery.
    finish(2);
    await settle();
    expect(started).to.deep.equal([1, 2, 3, 4]);
    finish(1);
    finish(4);
    await settle();
    expect(started).to.deep.equal([1, 2, 3, 4, 5, 6]);
    // Then the oldest running one finishes each time, until all ten are done.
    const finished = new Set([1, 2, 4]);
    while (finished.size < 10) {
      const oldest = started.find((tag) => !finished.has(tag)) as number;
      finish(oldest);
      finished.add(oldest);
      await settle();
      expect(dispatcher.inFlight).to.equal(Math.min(3, 10 - finished.size));
    }
    expect(started).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(maxInFlight()).to.equal(3);
    expect(dispatcher.inFlight).to.equal(0);
  });

  it('hold() keeps arrivals waiting without starting them, and openUp() starts them again in order', async () => {
    const { dispatcher, started, handedBack, finish } = setup(1);
    dispatcher.openUp();
    dispatcher.offer(delivery(1));
    dispatcher.hold();
    dispatcher.offer(delivery(2));
    dispatcher.offer(delivery(3));
    finish(1);
    await settle();
    expect(started, 'a free slot starts nothing while held').to.deep.equal([1]);
    expect(handedBack, 'nor is anything handed back').to.deep.equal([]);
    expect(dispatcher.inFlight).to.equal(0);
    dispatcher.openUp();
    expect(started).to.deep.equal([1, 2]);
    finish(2);
    await settle();
    expect(started).to.deep.equal([1, 2, 3]);
  });

  it('close() hands back everything waiting, and every later arrival, unstarted; jobs in flight go on', async () => {
    const { dispatcher, started, handedBack, finish, finishHandBack } = setup(1);
    dispatcher.openUp();
    dispatcher.offer(delivery(1));
    dispatcher.hold();
    dispatcher.offer(delivery(2));
    dispatcher.offer(delivery(3));
    let closed = false;
    const closing = dispatcher.close().then(() => (closed = true));
    expect(handedBack).to.deep.equal([2, 3]);
    await settle();
    expect(closed, 'close() waits for its hand-backs').to.equal(false);
    finishHandBack(2);
    finishHandBack(3);
    await closing;
    dispatcher.offer(delivery(4));
    expect(handedBack).to.deep.equal([2, 3, 4]);
    expect(started).to.deep.equal([1]);
    expect(dispatcher.inFlight, 'the job in flight goes on').to.equal(1);
    finish(1);
    await settle();
    expect(started, 'a freed slot starts nothing once closed').to.deep.equal([1]);
    finishHandBack(4);
    // hold() does not reopen a closed dispatcher.
    dispatcher.hold();
    dispatcher.offer(delivery(5));
    expect(handedBack).to.deep.equal([2, 3, 4, 5]);
    finishHandBack(5);
    expect(await dispatcher.whenIdle(1000)).to.equal(true);
  });

  it('openUp() after close() starts arrivals again', async () => {
    const { dispatcher, started, handedBack } = setup(2);
    await dispatcher.close();
    dispatcher.openUp();
    dispatcher.offer(delivery(1));
    expect(started).to.deep.equal([1]);
    expect(handedBack).to.deep.equal([]);
  });

  it('runAlone() counts as in flight: nothing else starts in its slot, and whenIdle waits for it', async () => {
    const { dispatcher, started, finish } = setup(1);
    const alone = dispatcher.runAlone(delivery(1));
    expect(dispatcher.inFlight).to.equal(1);
    expect(started).to.deep.equal([1]);
    dispatcher.openUp();
    dispatcher.offer(delivery(2));
    expect(started, 'the only slot is taken').to.deep.equal([1]);
    let idle = false;
    const idling = dispatcher.whenIdle().then((v) => (idle = v));
    await settle();
    expect(idle).to.equal(false);
    finish(1);
    await alone;
    // Its slot freed, the waiting delivery starts.
    expect(started).to.deep.equal([1, 2]);
    finish(2);
    await idling;
    expect(idle).to.equal(true);
    expect(dispatcher.inFlight).to.equal(0);
  });

  it('runAlone() frees its slot when processing rejects', async () => {
    const dispatcher = new Dispatcher({
      concurrency: 1,
      process: () => Promise.reject(new Error('boom')),
      handBack: () => Promise.resolve(),
    });
    const err = await dispatcher.runAlone(delivery(1)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as Error).message).to.equal('boom');
    expect(dispatcher.inFlight).to.equal(0);
    expect(await dispatcher.whenIdle(0)).to.equal(true);
  });

  it('whenIdle() resolves true at once when nothing is in flight', async () => {
    const { dispatcher } = setup(1);
    expect(await dispatcher.whenIdle(0)).to.equal(true);
  });

  it('whenIdle(grace) resolves true once the jobs in flight and the pending hand-backs are done', async () => {
    const { dispatcher, finish, finishHandBack } = setup(1);
    dispatcher.openUp();
    dispatcher.offer(delivery(1));
    dispatcher.hold();
    dispatcher.offer(delivery(2));
    void dispatcher.close();
    let idle: boolean | undefined;
    const idling = dispatcher.whenIdle(10_000).then((v) => (idle = v));
    finish(1);
    await settle();
    expect(dispatcher.inFlight).to.equal(0);
    expect(idle, 'a hand-back is still pending').to.equal(undefined);
    finishHandBack(2);
    await idling;
    expect(idle).to.equal(true);
  });

  it('whenIdle(grace) waits for a hand-back alone (nothing in flight)', async () => {
    const { dispatcher, finishHandBack } = setup(1);
    dispatcher.offer(delivery(1));
    let idle: boolean | undefined;
    const idling = dispatcher.whenIdle(10_000).then((v) => (idle = v));
    await settle();
    expect(idle).to.equal(undefined);
    finishHandBack(1);
    await idling;
    expect(idle).to.equal(true);
  });

  it('whenIdle(grace) resolves false when the grace runs out first, and a later idle does not change it', async () => {
    const { dispatcher, finish } = setup(1);
    dispatcher.openUp();
    dispatcher.offer(delivery(1));
    const started = Date.now();
    expect(await dispatcher.whenIdle(20)).to.equal(false);
    expect(Date.now() - started).to.be.at.least(15);
    // The expired waiter is gone; a new one still sees the job finish.
    const idling = dispatcher.whenIdle(10_000);
    finish(1);
    expect(await idling).to.equal(true);
  });
});
