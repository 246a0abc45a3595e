import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import type { BatchFold } from '../batch/batch-fold.js';
import { Tracker, type TrackerOptions } from './tracker.js';
import { retentionOf } from '../job-state/create-job-store.js';
import type { JobStore } from '../job-state/job-store.js';
import { MemoryJobStore } from '../job-state/memory-job-store.js';

/**
 * How long a request may wait for the fold to be up to date: the replay at start (or after the
 * connection was lost) and the mark's round trip. Past it the request fails as retryable while
 * the replay goes on, so the next one finds it further along.
 */
export const FOLLOWER_WAIT_MS = 15_000;

/**
 * Batch state for a long-running reader (the admin API): one {@link Tracker} that does not
 * announce, replaying the tracking stream once and then following it, instead of a replay per
 * request as `batch status` does. {@link fold} brings it up to date before answering (a mark
 * written and read back: `Tracker.sync`), so a request made right after a settlement sees it.
 *
 * It heals: a lost connection drops the tracker, and the next request replays the stream again
 * on a new connection. Requests that arrive while a mark is on its way share the next one, so
 * a burst of requests adds one mark to the stream, not one each.
 */
export class TrackingFollower {
  private session: Promise<Session> | undefined;
  private closed = false;

  constructor(
    private readonly config: CompiledConfig,
    private readonly log: Logger,
    private readonly waitMs = FOLLOWER_WAIT_MS,
    /** Plugins of each tracker it starts (the workflow advancer): made afresh on every new connection. */
    private readonly plugins: TrackerOptions['plugins'] = [],
  ) {}

  /** Starts the replay in the background (a failure is logged; the next request tries again). */
  start(): void {
    this.current().catch((err: unknown) => {
      this.log.warn('tracking stream not read (batch status will try again at the next request)', { err: (err as Error).message });
    });
  }

  /**
   * The fold with every record appended before the call.
   * @throws StagecoachError `CONNECTION_FAILED` when that takes longer than the wait bound, or the broker cannot be reached.
   */
  async fold(): Promise<BatchFold> {
    return (await this.synced()).tracker.fold;
  }

  /** The tracker with every record appended before the call folded in (its plugins too). @throws as fold() does. */
  async tracker(): Promise<Tracker> {
    return (await this.synced()).tracker;
  }

  /**
   * The memory job store with every record appended before the call (docs/job-state.md); with
   * the PostgreSQL store the admin API reads the table instead, and the follower keeps none.
   * @throws as fold() does.
   */
  async jobs(): Promise<JobStore> {
    const jobs = (await this.synced()).tracker.jobs;
    if (jobs === undefined) throw new StagecoachError('CONNECTION_FAILED', 'the tracking follower keeps no job store');
    return jobs;
  }

  private async synced(): Promise<Session> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new StagecoachError(
              'CONNECTION_FAILED',
              `the tracking stream was not read up to date within ${this.waitMs / 1000} s (broker slow or away, or a long replay still running): ask again`,
            ),
          ),
        this.waitMs,
      );
    });
    try {
      return await Promise.race([
        (async () => {
          const session = await this.current();
          await session.sync();
          return session;
        })(),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops following and closes the connection. Safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    const session = await this.session?.catch(() => undefined);
    this.session = undefined;
    await session?.close();
  }

  private current(): Promise<Session> {
    if (this.closed) return Promise.reject(new StagecoachError('CONNECTION_FAILED', 'the tracking follower is closed'));
    if (this.session === undefined) {
      const opening = Session.open(this.config, this.log, this.plugins, () => {
        // The connection is gone: the next request replays on a new one.
        if (this.session === opening) this.session = undefined;
      });
      this.session = opening;
      opening.catch(() => {
        if (this.session === opening) this.session = undefined;
      });
    }
    return this.session;
  }
}

/** One connection and the tracker reading on it, with the syncs of its requests shared. */
class Session {
  private syncing: Promise<void> | undefined;
  private next: Promise<void> | undefined;

  private constructor(
    readonly tracker: Tracker,
    private readonly connection: AmqpConnection,
  ) {}

  static async open(config: CompiledConfig, log: Logger, plugins: TrackerOptions['plugins'], onLost: () => void): Promise<Session> {
    const connection = await openConnection(config, log, 'stagecoach-admin-tracking');
    let session: Session | undefined;
    connection.on('close', () => {
      onLost();
      // Its channels went with it: what is left to close is the tracker's bookkeeping.
      void session?.tracker.close().catch(() => undefined);
    });
    try {
      // With the PostgreSQL store the admin API reads the table: no second writer of it here.
      const tracker = await Tracker.start(config, {
        log,
        connection,
        announce: false,
        ...(plugins === undefined ? {} : { plugins }),
        jobs: config.tracking.store.kind === 'postgres' ? false : new MemoryJobStore(retentionOf(config)),
      });
      session = new Session(tracker, connection);
      return session;
    } catch (err) {
      await connection.close().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Resolves once every record appended before the call is folded in. While a mark is on its
   * way it may have been written before this call, so a caller then waits for the next mark,
   * which every caller meanwhile shares.
   */
  sync(): Promise<void> {
    if (this.syncing === undefined) {
      const syncing = this.tracker.sync().finally(() => {
        if (this.syncing === syncing) this.syncing = undefined;
      });
      this.syncing = syncing;
      return syncing;
    }
    this.next ??= this.syncing
      .catch(() => undefined)
      .then(() => {
        this.next = undefined;
        return this.sync();
      });
    return this.next;
  }

  async close(): Promise<void> {
    await this.tracker.close().catch(() => undefined);
    await this.connection.close().catch(() => undefined);
  }
}
