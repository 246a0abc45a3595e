import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { isOpen } from '../../src/broker/connection-state.js';
import { createLogger } from '../../src/logging/logger.js';
import { GroupConnection, type ManagedConnection } from '../../src/runner/process/group-connection.js';
import { waitFor } from '../helpers/wait-for.js';

// The refusals these tests provoke are logged as errors: not printed among the results.
const log = Object.assign(createLogger({ test: 'group-connection' }, 'error'), { silent: true });
const RETRY_MS = 5;

/** A connection as the group sees it: watched through its 'close' event only (see connection-state.ts). */
const fakeConnection = (): AmqpConnection => new EventEmitter() as unknown as AmqpConnection;

/** A ConnectionManager the test drives: `connect(c)` brings a connection up, `lose()` drops it. */
class FakeManager extends EventEmitter {
  connection: AmqpConnection | undefined;
  connections = 0;
  closed = false;
  private first: ((connection: AmqpConnection) => void) | undefined;
  private refuse: ((err: Error) => void) | undefined;

  get connected(): boolean {
    return this.connection !== undefined;
  }

  get node(): string | undefined {
    return this.connection === undefined ? undefined : 'rabbit:5672';
  }

  start(): Promise<AmqpConnection> {
    return new Promise((resolve, reject) => {
      this.first = resolve;
      this.refuse = reject;
    });
  }

  connect(connection: AmqpConnection): void {
    this.connection = connection;
    this.connections++;
    // Watched from birth, as ConnectionManager does: `isOpen()` only knows about a close it was watching for.
    isOpen(connection);
    this.emit('connected', connection);
    this.first?.(connection);
    this.first = undefined;
  }

  /** The broker drops the connection: it closes, then the manager says so. */
  lose(): void {
    const lost = this.connection;
    this.connection = undefined;
    (lost as unknown as EventEmitter | undefined)?.emit('close');
    this.emit('disconnected', new Error('connection closed'));
  }

  close(): Promise<void> {
    this.closed = true;
    this.refuse?.(new Error('connection manager closed before it connected'));
    return Promise.resolve();
  }

  /** Connections dropped (their socket destroyed, reconnecting goes on). */
  readonly dropped: AmqpConnection[] = [];

  drop(_reason: string): void {
    if (this.connection !== undefined) this.dropped.push(this.connection);
    this.lose();
  }
}

interface Over {
  failures?: (connection: AmqpConnection, call: number, manager: FakeManager) => Error | undefined;
  attempts?: number;
  /** An attach of its own instead of the default (which attaches at once, or fails as `failures` says). */
  attach?: (connection: AmqpConnection, step: (where: string) => void) => Promise<void>;
  timeoutMs?: number;
}

function setup(over: Over = {}) {
  const manager = new FakeManager();
  const attached: AmqpConnection[] = [];
  const fatal: Error[] = [];
  const errors: Array<{ message: string; meta: unknown }> = [];
  const metrics = { up: [] as boolean[], reconnects: 0 };
  let lost = 0;
  // The test's logger, its error lines recorded.
  const recording = Object.assign(Object.create(log) as typeof log, {
    error: (message: string, meta: unknown) => void errors.push({ message, meta }),
  });
  const connection = new GroupConnection(manager as unknown as ManagedConnection, {
    log: recording,
    metrics: { setConnected: (up) => void metrics.up.push(up), setBlocked: () => undefined, reconnected: () => void metrics.reconnects++ },
    attach: (c, step) => {
      attached.push(c);
      if (over.attach !== undefined) return over.attach(c, step);
      const err = over.failures?.(c, attached.filter((a) => a === c).length, manager);
      return err === undefined ? Promise.resolve() : Promise.reject(err);
    },
    onLost: () => void lost++,
    onFatal: (err) => void fatal.push(err),
    reattachRetryMs: RETRY_MS,
    stallMs: 15_000,
    ...(over.attempts === undefined ? {} : { reattachAttempts: over.attempts }),
    ...(over.timeoutMs === undefined ? {} : { reattachTimeoutMs: over.timeoutMs }),
  });
  return { manager, connection, attached, fatal, errors, metrics, lost: () => lost };
}

describe('GroupConnection (the process re-attaching on every new connection)', () => {
  it('attaches nothing before attachFirst, then re-attaches everything on the connection after a loss', async () => {
    const { manager, connection, attached, metrics, lost } = setup();
    const first = fakeConnection();
    const starting = connection.start();
    manager.connect(first);
    expect(await starting).to.equal(first);
    // Connected, but the group still checks and provisions on it: nothing attached by itself.
    expect(attached).to.deep.equal([]);
    expect(connection.attached).to.equal(false);

    await connection.attachFirst(first);
    expect(attached).to.deep.equal([first]);
    expect(connection.attached).to.equal(true);

    manager.lose();
    expect(lost()).to.equal(1);
    expect(connection.connected).to.equal(false);
    const second = fakeConnection();
    manager.connect(second);
    await waitFor('re-attached on the second connection', () => attached.length === 2);
    expect(attached[1]).to.equal(second);
    expect(connection.connections).to.equal(2);
    expect(metrics.up).to.deep.equal([true, false, true]);
    expect(metrics.reconnects).to.equal(1);
  });

  it('retries a re-attach refused on a live connection, and goes on once it succeeds', async () => {
    const first = fakeConnection();
    const second = fakeConnection();
    // The broker just restarted refuses twice what it holds, then takes it.
    const { manager, connection, attached, fatal } = setup({
      failures: (c, call) => (c === second && call <= 2 ? new Error('home node down or inaccessible') : undefined),
    });
    const starting = connection.start();
    manager.connect(first);
    await connection.attachFirst(await starting);
    manager.lose();
    manager.connect(second);
    await waitFor('three attaches on the second connection', () => attached.filter((c) => c === second).length === 3);
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 4));
    expect(attached.filter((c) => c === second)).to.have.length(3);
    expect(fatal).to.deep.equal([]);
  });

  it('fails the process once a live connection refused every attempt', async () => {
    const first = fakeConnection();
    const second = fakeConnection();
    const { manager, connection, attached, fatal } = setup({
      attempts: 3,
      failures: (c) => (c === second ? new Error('PRECONDITION_FAILED - inequivalent arg') : undefined),
    });
    const starting = connection.start();
    manager.connect(first);
    await connection.attachFirst(await starting);
    manager.lose();
    manager.connect(second);
    await waitFor('the group failed', () => fatal.length === 1);
    expect(fatal[0].message).to.match(/inequivalent arg/);
    expect(attached.filter((c) => c === second)).to.have.length(3);
  });

  it('leaves a re-attach cut short by another loss to the next connection, and retries nothing on the lost one', async () => {
    const first = fakeConnection();
    const second = fakeConnection();
    const third = fakeConnection();
    const set = setup({
      failures: (c, _call, manager) => {
        if (c !== second) return undefined;
        manager.lose(); // the connection goes while attaching on it
        return new Error('channel closed');
      },
    });
    const manager = set.manager;
    const starting = set.connection.start();
    manager.connect(first);
    await set.connection.attachFirst(await starting);
    manager.lose();
    manager.connect(second);
    await waitFor('the attach on the second connection', () => set.attached.includes(second));
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 4));
    expect(set.attached.filter((c) => c === second)).to.have.length(1);
    manager.connect(third);
    await waitFor('re-attached on the third connection', () => set.attached.includes(third));
    expect(set.fatal).to.deep.equal([]);
  });

  it('a first attach cut short by a loss is not an error: the next connection attaches everything', async () => {
    const first = fakeConnection();
    const second = fakeConnection();
    const set = setup({
      failures: (c, _call, manager) => {
        if (c !== first) return undefined;
        manager.lose();
        return new Error('connection closed');
      },
    });
    const manager = set.manager;
    const starting = set.connection.start();
    manager.connect(first);
    await set.connection.attachFirst(await starting);
    manager.connect(second);
    await waitFor('attached on the second connection', () => set.attached.includes(second));
  });

  it('a first attach refused on a live connection fails the start', async () => {
    const { manager, connection } = setup({ failures: () => new Error('ACCESS_REFUSED') });
    const starting = connection.start();
    const first = fakeConnection();
    manager.connect(first);
    const err = await connection.attachFirst(await starting).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(Error).with.property('message', 'ACCESS_REFUSED');
  });

  describe('an attach bounded in time (amqplib RPCs have no timeout; heartbeats keep a stuck connection looking alive)', () => {
    const TIMEOUT_MS = 30;

    /** Attached on a first connection, then reconnected to a second one, attached by `attachSecond`. */
    async function reconnected(attachSecond: (step: (where: string) => void) => Promise<void>) {
      const first = fakeConnection();
      const second = fakeConnection();
      const set = setup({ timeoutMs: TIMEOUT_MS, attach: (c, step) => (c === second ? attachSecond(step) : Promise.resolve()) });
      const starting = set.connection.start();
      set.manager.connect(first);
      await set.connection.attachFirst(await starting);
      set.manager.lose();
      set.manager.connect(second);
      return { ...set, second };
    }

    it('drops a connection whose re-attach never finishes, naming where it was stuck; the next connection attaches everything', async () => {
      const set = await reconnected((step) => {
        step('runners');
        // An RPC the broker never answers: the attach on the second connection never settles.
        return new Promise<void>(() => undefined);
      });
      const { manager, connection, second } = set;
      await waitFor('the stuck connection dropped', () => manager.dropped.length === 1);
      expect(manager.dropped).to.deep.equal([second]);
      expect(connection.connected, 'the manager reconnects').to.equal(false);
      expect(set.errors).to.have.length(1);
      expect(set.errors[0].meta).to.deep.equal({ stuck_at: 'runners', timeout_ms: TIMEOUT_MS });

      const third = fakeConnection();
      manager.connect(third);
      await waitFor('attached again on the third connection', () => set.attached.includes(third));
      expect(set.fatal).to.deep.equal([]);
      // Nothing is dropped twice: the bound of the lost second connection has nothing left to cut.
      await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS * 2));
      expect(manager.dropped).to.deep.equal([second]);
      expect(connection.connected).to.equal(true);
    });

    it('leaves a re-attach that finishes within the bound alone', async () => {
      // The second attach takes a while, less than the bound.
      const set = await reconnected(() => new Promise<void>((resolve) => setTimeout(resolve, TIMEOUT_MS / 3)));
      // Timers of a duration no longer, set earlier, fire first: past this one, the group's bound
      // (set when the attach began) has run out, had the attach not finished in time.
      await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS * 2));
      expect(set.manager.dropped).to.deep.equal([]);
      expect(set.errors).to.deep.equal([]);
      expect(set.connection.connected).to.equal(true);
    });
  });

  it('next() waits for the connection after the lost one; halt() ends the wait and any re-attach', async () => {
    const { manager, connection, attached } = setup();
    const first = fakeConnection();
    const starting = connection.start();
    manager.connect(first);
    await connection.attachFirst(await starting);
    manager.lose();
    const second = fakeConnection();
    const waiting = connection.next(first);
    manager.connect(second);
    expect(await waiting).to.equal(second);
    // Already up: no wait.
    expect(await connection.next(first)).to.equal(second);

    manager.lose();
    const stopped = connection.next(second).catch((err: unknown) => err);
    connection.halt(new Error('stage group stopped while starting'));
    expect(await stopped)
      .to.be.instanceOf(Error)
      .with.property('message', 'stage group stopped while starting');
    const count = attached.length;
    manager.connect(fakeConnection());
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 4));
    expect(attached).to.have.length(count);
  });
});
