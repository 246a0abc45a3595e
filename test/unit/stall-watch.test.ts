import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { StallWatch, STALL_TICK_MS } from '../../src/broker/stall-watch.js';
import { createLogger } from '../../src/logging/logger.js';

const log = Object.assign(createLogger({ test: 'stall-watch' }, 'error'), { silent: true });

/** A connection whose socket's byte count the test sets, and whose channel opens count probes (never answered). */
function fakeConnection(): { connection: AmqpConnection; stream: { bytesRead: number }; probes: () => number } {
  const stream = { bytesRead: 0 };
  let probes = 0;
  const connection = Object.assign(new EventEmitter(), {
    connection: { stream },
    createChannel: () => {
      probes++;
      return new Promise(() => undefined);
    },
  }) as unknown as AmqpConnection;
  return { connection, stream, probes: () => probes };
}

describe('StallWatch', () => {
  let now = 0;
  let blocked = false;
  const clock = (): number => now;
  /** Ticks as the interval would, one second at a time, for `ms`. */
  const run = (watch: StallWatch, ms: number): void => {
    for (let t = 0; t < ms; t += STALL_TICK_MS) {
      now += STALL_TICK_MS;
      watch.tick();
    }
  };

  beforeEach(() => {
    now = 1_000_000;
    blocked = false;
  });

  it('stalls after stallMs of silence, having probed once after a third of it; bytes end the stall', () => {
    const watch = new StallWatch(9000, log, () => blocked, clock);
    const fake = fakeConnection();
    watch.watch(fake.connection);
    run(watch, 3000);
    expect(fake.probes(), 'probed after a third').to.equal(1);
    run(watch, 5000);
    expect(watch.silentMs).to.equal(undefined);
    run(watch, 1000);
    expect(watch.silentMs).to.equal(9000);
    expect(fake.probes(), 'the unanswered probe is not repeated').to.equal(1);
    fake.stream.bytesRead = 100;
    run(watch, 1000);
    expect(watch.silentMs).to.equal(undefined);
    watch.lost();
  });

  it('probes on one kept channel (a basic.qos), one probe at a time', async () => {
    const watch = new StallWatch(3000, log, () => blocked, clock);
    const stream = { bytesRead: 0 };
    let opened = 0;
    let qos = 0;
    const channel = Object.assign(new EventEmitter(), {
      prefetch: () => {
        qos++;
        return Promise.resolve();
      },
    });
    const connection = Object.assign(new EventEmitter(), {
      connection: { stream },
      createChannel: () => {
        opened++;
        return Promise.resolve(channel);
      },
    }) as unknown as AmqpConnection;
    watch.watch(connection);
    for (let i = 0; i < 3; i++) {
      run(watch, 1000);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(opened).to.equal(1);
    expect(qos).to.equal(3);
    watch.lost();
  });

  it('does not count silence while the broker blocks the connection, nor across a stall of the event loop', () => {
    const watch = new StallWatch(5000, log, () => blocked, clock);
    watch.watch(fakeConnection().connection);
    blocked = true;
    run(watch, 20_000);
    expect(watch.silentMs).to.equal(undefined);
    blocked = false;
    run(watch, 4000);
    expect(watch.silentMs).to.equal(undefined);
    now += 30_000; // the loop stuck for 30 s: the socket could not be read
    watch.tick();
    expect(watch.silentMs).to.equal(undefined);
    watch.lost();
    expect(watch.silentMs, 'nothing watched').to.equal(undefined);
  });
});
