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
