import type { AmqpConnection } from './amqp-connection.js';

const closedConnections = new WeakSet<AmqpConnection>();
const watchedConnections = new WeakSet<AmqpConnection>();

/** Whether `connection` is still open, watched from its first use on (amqplib has no flag). */
export function isOpen(connection: AmqpConnection): boolean {
  if (!watchedConnections.has(connection)) {
    watchedConnections.add(connection);
    connection.once('close', () => closedConnections.add(connection));
  }
  return !closedConnections.has(connection);
}

/**
 * Rejects when `connection` closes (at once if it has): raced against work on it, that work ends
 * with its connection even when something of it would never settle (an attach waiting on a
 * promise of the lost connection), so that nothing waiting for that work waits for ever.
 */
export function whenClosed(connection: AmqpConnection): Promise<never> {
  return new Promise<never>((_resolve, reject) => {
    const closed = (): void => reject(new Error('connection closed'));
    if (!isOpen(connection)) closed();
    else connection.once('close', closed);
  });
}
