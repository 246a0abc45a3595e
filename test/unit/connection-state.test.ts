import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { isOpen, whenClosed } from '../../src/broker/connection-state.js';
import { IsolationGate } from '../../src/runner/intake/isolation-gate.js';

/** A connection as connection-state sees it: its 'close' event only. */
const fakeConnection = (): AmqpConnection => {
  const connection = new EventEmitter() as unknown as AmqpConnection;
  isOpen(connection); // watched from birth, as ConnectionManager does
  return connection;
};

/** Lets promise callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('connection state', () => {
  it('whenClosed rejects once the connection closes, and at once when it has', async () => {
    const connection = fakeConnection();
    let outcome: unknown = 'pending';
    whenClosed(connection).catch((err: unknown) => (outcome = err));
    await settle();
    expect(outcome).to.equal('pending');
    connection.emit('close');
    await settle();
    expect(outcome).to.be.instanceOf(Error).with.property('message', 'connection closed');
    const late = await whenClosed(connection).catch((err: unknown) => err);
    expect(late).to.be.instanceOf(Error).with.property('message', 'connection closed');
  });

  it('an attach stuck on its connection, raced with whenClosed, lets the isolation gate open once the connection closes', async () => {
    const gate = new IsolationGate();
    const connection = fakeConnection();
    // What StageGroup does: the attach never settles (a promise of a lost connection).
    const attaching = gate.whileAttaching(() => Promise.race([new Promise<void>(() => undefined), whenClosed(connection)]));
    attaching.catch(() => undefined);
    let ran = false;
    const alone = gate.runAlone(() => Promise.resolve((ran = true)));
    await settle();
    expect(ran, 'no window while attaching').to.equal(false);
    connection.emit('close'); // dropped past its bound
    await alone;
    expect(ran).to.equal(true);
  });
});
