import type { AmqpConnection } from './amqp-connection.js';

/**
 * How long a close may wait for the broker's answer. amqplib's `close()` sends Close and waits
 * for CloseOk; on a connection whose socket died unnoticed (the broker dropped it during a
 * blocked event loop, and the client has not read the reset yet) or that the broker blocked, that
 * answer may never come (amqp-node/amqplib#181, #744), and a stage's `stop()` would hang with it.
 */
export const CLOSE_TIMEOUT_MS = 5000;

/**
 * Closes `connection`, waiting at most `timeoutMs` for the broker: past that the socket is
 * destroyed ({@link cutConnection}), which the broker sees as a lost connection (unacknowledged
 * deliveries go back to their queues, as they would with the close; a broker that stopped
 * reading, during an alarm, sees it once it reads again). Never rejects.
 * @returns false when the broker did not answer in time.
 */
export async function closeWithin(connection: AmqpConnection, timeoutMs = CLOSE_TIMEOUT_MS): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const answered = await Promise.race([
    connection.close().then(
      () => true,
      () => true,
    ),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
  ]);
  clearTimeout(timer);
  if (!answered) cutConnection(connection);
  return answered;
}

/**
 * Destroys the socket under `connection` without waiting for anything: what is unacknowledged on
 * it goes back to its queues. With an error, so that amqplib closes its side too (its channels
 * emit 'close', its heartbeat timer stops) instead of waiting for missed heartbeats.
 */
export function cutConnection(connection: AmqpConnection, reason = 'connection cut: the broker did not answer in time'): void {
  // The socket under amqplib's connection: not in its types, present in every version we use.
  const socket = (connection as unknown as { connection?: { stream?: { destroy(err?: Error): void } } }).connection?.stream;
  socket?.destroy(new Error(reason));
}
