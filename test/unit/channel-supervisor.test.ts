import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import type { Logger } from '../../src/logging/logger.js';
import { ChannelSupervisor, MAX_HEAL_ATTEMPTS } from '../../src/runner/channels/channel-supervisor.js';
import { waitFor } from '../helpers/wait-for.js';

const HEAL_MS = 5;

/** A channel as the supervisor sees it: open or not, and which open() made it. */
class FakeChannel {
  open = true;
  closeCalls = 0;
  constructor(readonly generation: number) {}
}

/** The connection is watched through its 'close' event only (see connection-state.ts). */
const fakeConnection = (): AmqpConnection => new EventEmitter() as unknown as AmqpConnection;

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;

interface OpenCall {
  connection: AmqpConnection;
  lost: (reason: string) => void;
  healing: boolean;
  /** The channel it resolved with, once it did. */
  channel?: FakeChannel;
}

/**
 * A supervisor over an open() the test controls: by default each call resolves at once with a
 * new channel; `failing` calls reject first; `manual` leaves them pending until `resolve(i)`.
 */
function setup(over: { manual?: boolean } = {}) {
  const calls: OpenCall[] = [];
  const pending: Array<{ resolve: (channel: FakeChannel) => void; reject: (err: Error) => void }> = [];
  const opened: FakeChannel[] = [];
  const closed: FakeChannel[] = [];
  const fatal: Error[] = [];
  const control = { failing: 0, manual: over.manual ?? false };
  let generation = 0;
  const supervisor = new ChannelSupervisor<FakeChannel>({
    name: 'publisher',
    log: silent,
    healDelayMs: HEAL_MS,
    isOpen: (channel) => channel.open,
    open: (connection, lost, healing) => {
      const call: OpenCall = { connection, lost, healing };
      calls.push(call);
      if (control.failing > 0) {
        control.failing--;
        return Promise.reject(new Error(`open ${calls.length} failed`));
      }
      const make = (): FakeChannel => (call.channel = new FakeChannel(++generation));
      if (!control.manual) return Promise.resolve(make());
      return new Promise<FakeChannel>((resolve, reject) => pending.push({ resolve: (ch) => resolve((call.channel = ch)), reject }));
    },
    close: (channel) => {
      channel.open = false;
      channel.closeCalls++;
      closed.push(channel);
      return Promise.resolve();
    },
    onOpen: (channel) => opened.push(channel),
    onFatal: (err) => fatal.push(err),
  });
  /** The channel of the latest open() reports itself lost, as a channel error would. */
  const lose = (call = calls[calls.length - 1]): void => {
    if (call.channel) call.channel.open = false;
    call.lost('channel error');
  };
  return { supervisor, calls, pending, opened, closed, fatal, control, lose, next: () => ++generation };
}

/** Resolves with what `promise` settled to, or 'pending' if it has not settled by the next macrotask. */
async function state(promise: Promise<unknown>): Promise<unknown> {
  let result: unknown = 'pending';
  promise.then(
    (value) => (result = { value }),
    (err: unknown) => (result = { err }),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return result;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => expect.fail('expected a rejection'),
    (err: unknown) => err as Error,
  );
}

/** Waits long enough for several heal delays to pass: for checking that nothing happens. */
const severalHealDelays = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, HEAL_MS * 10));

const poll = <T>(what: string, probe: () => T | undefined | false): Promise<T> => waitFor(what, probe, 2000, 2);

describe('ChannelSupervisor', () => {
  it('attach() opens the channel once, not healing, and ready() hands it out', async () => {
    const { supervisor, calls, opened } = setup();
    const connection = fakeConnection();
    const channel = await supervisor.attach(connection);
    expect(calls).to.have.length(1);
    expect(calls[0].connection).to.equal(connection);
    expect(calls[0].healing).to.equal(false);
    expect(opened).to.deep.equal([channel]);
    expect(supervisor.current).to.equal(channel);
    expect(await supervisor.ready()).to.equal(channel);
    expect(await supervisor.ready()).to.equal(channel);
    expect(calls, 'ready() opens nothing').to.have.length(1);
  });

  it('attach() fails loudly when the channel cannot be opened', async () => {
    const { supervisor, control } = setup();
    control.failing = 1;
    const err = await rejection(supervisor.attach(fakeConnection()));
    expect(err.message).to.equal('open 1 failed');
    expect(supervisor.current).to.equal(undefined);
  });

  it('a loss reported through `lost` re-opens the channel after the heal delay, healing, on the same connection', async () => {
    const { supervisor, calls, opened, lose } = setup();
    const connection = fakeConnection();
    const first = await supervisor.attach(connection);
    lose();
    expect(supervisor.current).to.equal(undefined);
    expect(calls, 'nothing re-opened before the heal delay').to.have.length(1);
    await poll('the heal', () => calls.length === 2);
    expect(calls[1].healing).to.equal(true);
    expect(calls[1].connection).to.equal(connection);
    const healed = await supervisor.ready();
    expect(healed).to.not.equal(first);
    expect(healed.generation).to.equal(2);
    expect(opened).to.deep.equal([first, healed]);
    await severalHealDelays();
    expect(calls, 'one loss, one re-open').to.have.length(2);
  });

  it('ready() during healing waits, and resolves with the healed channel', async () => {
    const { supervisor, calls, pending, control, lose } = setup({ manual: true });
    const connection = fakeConnection();
    const attaching = supervisor.attach(connection);
    pending[0].resolve(new FakeChannel(1));
    const first = await attaching;
    lose();
    const waiting = [supervisor.ready(), supervisor.ready()];
    await poll('the heal to start', () => calls.length === 2);
    expect(await state(waiting[0]), 'still opening').to.equal('pending');
    control.manual = false;
    const healed = new FakeChannel(2);
    pending[1].resolve(healed);
    expect(await waiting[0]).to.equal(healed);
    expect(await waiting[1]).to.equal(healed);
    expect(healed).to.not.equal(first);
  });

  it('ready(stale) never returns the stale channel, even while it still looks open', async () => {
    const { supervisor, calls, lose } = setup();
    const first = await supervisor.attach(fakeConnection());
    // A publish on `first` failed as lost, but the channel has not reported its close yet.
    const waiting = supervisor.ready(first);
    expect(await state(waiting)).to.equal('pending');
    expect(await supervisor.ready(), 'without a stale one, the open channel is fine').to.equal(first);
    lose();
    const healed = await waiting;
    expect(healed).to.not.equal(first);
    expect(calls).to.have.length(2);
    // Once healed, asking past the old one answers at once.
    expect(await supervisor.ready(first)).to.equal(healed);
  });

  it('a waiter whose stale channel is what the heal opened keeps waiting for the next one', async () => {
    const { supervisor, calls, pending, lose } = setup({ manual: true });
    const attaching = supervisor.attach(fakeConnection());
    const first = new FakeChannel(1);
    pending[0].resolve(first);
    await attaching;
    lose();
    await poll('the heal to start', () => calls.length === 2);
    const second = new FakeChannel(2);
    // A caller that already failed on the channel about to be handed out.
    const past = supervisor.ready(second);
    const any = supervisor.ready();
    pending[1].resolve(second);
    expect(await any).to.equal(second);
    expect(await state(past)).to.equal('pending');
    lose(calls[1]);
    await poll('the second heal to start', () => calls.length === 3);
    const third = new FakeChannel(3);
    pending[2].resolve(third);
    expect(await past).to.equal(third);
  });

  it('ignores a late loss reported by a channel of an older generation', async () => {
    const { supervisor, calls, lose } = setup();
    await supervisor.attach(fakeConnection());
    const oldGeneration = calls[0];
    lose(oldGeneration);
    await poll('the heal', () => calls.length === 2);
    const healed = await supervisor.ready();
    // The old channel reports its close again, late.
    oldGeneration.lost('closed late');
    expect(supervisor.current).to.equal(healed);
    await severalHealDelays();
    expect(calls, 'no re-open for an old channel').to.have.length(2);
    expect(supervisor.current).to.equal(healed);
  });

  it('ignores the loss of a channel that was replaced by a new attach()', async () => {
    const { supervisor, calls } = setup();
    await supervisor.attach(fakeConnection());
    const next = fakeConnection();
    const reattached = await supervisor.attach(next);
    calls[0].lost('old connection closed');
    await severalHealDelays();
    expect(calls).to.have.length(2);
    expect(supervisor.current).to.equal(reattached);
  });

  it('heals a channel that closed before it finished opening', async () => {
    const { supervisor, calls, pending, control } = setup({ manual: true });
    const connection = fakeConnection();
    const attaching = supervisor.attach(connection);
    const dead = new FakeChannel(1);
    // It closes, and says so, before open() resolves: `lost` cannot tell it is current yet.
    dead.open = false;
    calls[0].lost('closed while opening');
    control.manual = false;
    pending[0].resolve(dead);
    expect((await rejection(attaching)).message).to.match(/closed while opening/);
    const healed = await supervisor.ready();
    expect(healed).to.not.equal(dead);
    expect(calls[1].healing).to.equal(true);
  });

  it('reports onFatal after MAX_HEAL_ATTEMPTS failed re-opens in a row, and rejects the waiters', async () => {
    const { supervisor, calls, fatal, control, lose } = setup();
    await supervisor.attach(fakeConnection());
    control.failing = Number.POSITIVE_INFINITY;
    lose();
    const waiting = supervisor.ready();
    const err = await rejection(waiting);
    expect(fatal).to.have.length(1);
    expect(fatal[0]).to.equal(err);
    expect(err.message).to.equal(`open ${1 + MAX_HEAL_ATTEMPTS} failed`);
    expect(calls.slice(1).every((call) => call.healing)).to.equal(true);
    expect(calls).to.have.length(1 + MAX_HEAL_ATTEMPTS);
    await severalHealDelays();
    expect(calls, 'it gives up: no more re-opens').to.have.length(1 + MAX_HEAL_ATTEMPTS);
    expect(fatal).to.have.length(1);
  });

  it('counts only failures in a row: a successful re-open starts the count again', async () => {
    const { supervisor, calls, fatal, control, lose } = setup();
    await supervisor.attach(fakeConnection());
    control.failing = MAX_HEAL_ATTEMPTS - 1;
    lose();
    const healed = await supervisor.ready();
    expect(calls).to.have.length(1 + MAX_HEAL_ATTEMPTS);
    control.failing = MAX_HEAL_ATTEMPTS - 1;
    lose();
    const again = await supervisor.ready(healed);
    expect(again).to.not.equal(healed);
    expect(calls).to.have.length(1 + 2 * MAX_HEAL_ATTEMPTS);
    expect(fatal).to.deep.equal([]);
  });

  it('does not heal on a connection that has closed: the owner attaches to the next one', async () => {
    const { supervisor, calls, fatal, lose } = setup();
    const connection = fakeConnection();
    await supervisor.attach(connection);
    (connection as unknown as EventEmitter).emit('close');
    lose();
    await severalHealDelays();
    expect(calls, 'no re-open on a dead connection').to.have.length(1);
    expect(fatal).to.deep.equal([]);
  });

  it('detach() rejects the waiters and cancels a pending heal', async () => {
    const { supervisor, calls, lose } = setup();
    await supervisor.attach(fakeConnection());
    lose();
    const waiting = supervisor.ready();
    supervisor.detach();
    expect((await rejection(waiting)).message).to.match(/lost with its connection/);
    await severalHealDelays();
    expect(calls, 'the heal was cancelled').to.have.length(1);
    expect(supervisor.current).to.equal(undefined);
    expect((await rejection(supervisor.ready())).message).to.match(/no connection/);
    // The next connection brings a channel again.
    const next = await supervisor.attach(fakeConnection());
    expect(await supervisor.ready()).to.equal(next);
  });

  it('detach() while a heal is opening: the late channel is closed, not handed out', async () => {
    const { supervisor, calls, pending, closed, lose } = setup({ manual: true });
    const attaching = supervisor.attach(fakeConnection());
    pending[0].resolve(new FakeChannel(1));
    await attaching;
    lose();
    await poll('the heal to start', () => calls.length === 2);
    supervisor.detach();
    const late = new FakeChannel(2);
    pending[1].resolve(late);
    await poll('the late channel to be closed', () => closed.includes(late));
    expect(supervisor.current).to.equal(undefined);
    await severalHealDelays();
    expect(calls).to.have.length(2);
  });

  it('close() closes the channel, rejects the waiters and every later ready(), and stops healing', async () => {
    const { supervisor, calls, closed, lose } = setup();
    const channel = await supervisor.attach(fakeConnection());
    const waiting = supervisor.ready(channel);
    await supervisor.close();
    expect(closed).to.deep.equal([channel]);
    expect(channel.open).to.equal(false);
    expect((await rejection(waiting)).message).to.match(/closed/);
    expect((await rejection(supervisor.ready())).message).to.match(/closed/);
    // A loss reported as the channel closes is not healed.
    lose();
    await severalHealDelays();
    expect(calls).to.have.length(1);
    await supervisor.close();
    expect(channel.closeCalls, 'closed once').to.equal(1);
    expect((await rejection(supervisor.attach(fakeConnection()))).message).to.match(/closed/);
  });

  it('close() during a heal delay cancels the heal', async () => {
    const { supervisor, calls, lose } = setup();
    await supervisor.attach(fakeConnection());
    lose();
    await supervisor.close();
    await severalHealDelays();
    expect(calls).to.have.length(1);
  });
});
