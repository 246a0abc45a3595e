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
 * destroyed, which the broker sees as a lost connection (unacknowledged deliveries go back to
 * their queues, as they would with the close). Never rejects.
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
  if (!answered) {
    // The socket under amqplib's connection: not in its types, present in every version we use.
    (connection as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }
  return answered;
}
