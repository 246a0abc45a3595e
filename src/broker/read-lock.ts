import type { CompiledConfig } from '../config/config.types.js';
import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';

/** How long a read waits for another process's read to finish before giving up, in ms. */
export const READ_LOCK_WAIT_MS = 30_000;

/** AMQP reply codes of a refused declare: another connection owns the exclusive queue; no configure permission. */
const RESOURCE_LOCKED = 405;
const ACCESS_REFUSED = 403;
/** The first pause between two tries for the lock, in ms; it doubles up to 250. */
const FIRST_PAUSE_MS = 20;

/**
 * Runs `read` while this process holds the broker's read lock of the prefix: an exclusive queue,
 * `<prefix>.read-lock` (BrokerNames.readLock), declared on a connection of its own. The broker
 * lets one connection at a time own an exclusive queue and deletes it when that connection
 * closes, so the lock is released when `read` ends, and also when the process dies or its
 * connection drops: a crashed reader never leaves the lock behind.
 *
 * Why: reads that hold messages unacknowledged (see exclusiveRead in peek.ts) take each other's
 * messages when they overlap, also from two processes (a `stagecoach dead retry` in a terminal
 * beside the admin server's dashboard). Waits up to `waitMs` for the lock, then fails with
 * `CONFLICT`. A user who may not declare the lock queue (no configure permission on it) reads
 * without it, as before the lock existed, with a warning.
 */
export async function withReadLock<T>(config: CompiledConfig, log: Logger, read: () => Promise<T>, waitMs = READ_LOCK_WAIT_MS): Promise<T> {
  const connection = await openConnection(config, log, 'stagecoach-read-lock');
  try {
    await acquire(connection, new BrokerNames(config.prefix).readLock, log, waitMs);
    return await read();
  } finally {
    // Closing the connection deletes the exclusive queue: the release, on every path.
    await connection.close().catch(() => undefined);
  }
}

async function acquire(connection: AmqpConnection, lock: string, log: Logger, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, 250)) {
    // A refused declare closes its channel: one channel per attempt.
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    try {
      await channel.assertQueue(lock, { exclusive: true, durable: false, autoDelete: false });
      await channel.close();
      return;
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code === ACCESS_REFUSED) {
        log.warn('read lock not taken (no configure permission on it): reading without it, beside other processes', { lock });
        return;
      }
      if (code !== RESOURCE_LOCKED) throw err;
      if (pause === FIRST_PAUSE_MS)
        log.info('waiting for the read lock: another process is reading held messages under this prefix', { lock });
      if (Date.now() + pause > deadline) {
        throw new StagecoachError(
          'CONFLICT',
          `another process has been reading held messages under this prefix for over ${waitMs / 1000} s (it holds ${lock}): try again`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
