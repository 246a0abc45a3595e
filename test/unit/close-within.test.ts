import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { closeWithin } from '../../src/broker/close-within.js';

/** A connection whose close resolves, rejects or never answers, and whose socket records a destroy. */
function fakeConnection(close: () => Promise<void>): { connection: AmqpConnection; destroyed: () => boolean } {
  let destroyed = false;
  const connection = { close, connection: { stream: { destroy: () => (destroyed = true) } } } as unknown as AmqpConnection;
  return { connection, destroyed: () => destroyed };
}

describe('closeWithin', () => {
  it('returns true when the broker answers the close, and leaves the socket alone', async () => {
    const fake = fakeConnection(() => Promise.resolve());
    expect(await closeWithin(fake.connection, 1000)).to.equal(true);
    expect(fake.destroyed()).to.equal(false);
  });

  it('takes a rejected close (already closed) as done', async () => {
    const fake = fakeConnection(() => Promise.reject(new Error('Connection closed')));
    expect(await closeWithin(fake.connection, 1000)).to.equal(true);
    expect(fake.destroyed()).to.equal(false);
  });

  it('destroys the socket when the close is never answered, instead of waiting for ever', async () => {
    const fake = fakeConnection(() => new Promise<void>(() => undefined));
    const started = Date.now();
    expect(await closeWithin(fake.connection, 50)).to.equal(false);
    expect(Date.now() - started).to.be.below(1000);
    expect(fake.destroyed()).to.equal(true);
  });
});
