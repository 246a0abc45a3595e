import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { BrokerFlags } from '../flags/broker-flags.js';
import type { Logger } from '../logging/logger.js';
import { openConnection } from './amqp-connection.js';

/** How long a read waits for another process's read to finish before giving up, in ms. */
export const READ_LOCK_WAIT_MS = 30_000;

/** The first pause between two tries for the lock, in ms; it doubles up to 250. */
const FIRST_PAUSE_MS = 20;

/**
 * Runs `read` while this process holds the broker's read lock of the prefix: the `read-lock`
 * broker flag (src/flags/flag.ts), an exclusive queue held on a connection of its own. The broker
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
    await acquire(new BrokerFlags(connection, config), log, waitMs);
    return await read();
  } finally {
    // Closing the connection deletes the exclusive queue: the release, on every path.
    await connection.close().catch(() => undefined);
  }
}

async function acquire(flags: BrokerFlags, log: Logger, waitMs: number): Promise<void> {
  const lock = flags.name({ kind: 'read-lock' });
  const deadline = Date.now() + waitMs;
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, 250)) {
    const outcome = await flags.hold({ kind: 'read-lock' });
    if (outcome === 'held') return;
    if (outcome === 'refused') {
      log.warn('read lock not taken (no configure permission on it): reading without it, beside other processes', { lock });
      return;
    }
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
