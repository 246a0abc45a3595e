import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import { EventPublisher } from '../events/event-publisher.js';
import type { Logger } from '../logging/logger.js';
import { BatchFold, isComplete, type TrackedBatch } from './batch-fold.js';
import { stamp, type AnnouncedReport, type TrackingRecord } from './tracking-report.js';
import { TrackingReader } from './tracking-reader.js';

export interface TrackerOptions {
  log: Logger;
  /** An open connection to use; by default the tracker opens (and closes) its own. */
  connection?: AmqpConnection;
  /** Told of every batch announced (tests, the CLI's log line). */
  onCompleted?: (batch: TrackedBatch) => void;
  /**
   * False for a reader that only shows state (the admin API's TrackingFollower): it publishes no
   * event and appends no `announced` record, so it may run beside the one announcing tracker.
   * @defaultValue true
   */
  announce?: boolean;
}

/**
 * `stagecoach tracker` as a library class: replays the tracking stream from its first offset
 * into a {@link BatchFold}, then follows it. When a batch completes it publishes
 * `batch.completed` on `<prefix>.events` (routing key `batch.completed`, subject the batch id,
 * data `{ batch, tenant, jobs, failed }`) and appends an `announced` record to the stream.
 *
 * Announcements: at most once per tracker instance, and not again after a restart, because the
 * replay reads the `announced` records; nothing is announced before the replay caught up with
 * the stream as it was at start. The event goes before its record, so a crash between the two
 * announces it again after the restart (at-least-once across crashes), and two trackers running
 * at once may both announce a batch (docs/batches.md).
 */
export class Tracker {
  readonly fold = new BatchFold();
  private reader: TrackingReader | undefined;
  private live = false;
  private readonly announced = new Set<string>();
  private readonly pending = new Set<Promise<void>>();
  private events: EventPublisher | undefined;
  private ownConnection: AmqpConnection | undefined;

  private constructor(
    private readonly config: CompiledConfig,
    private readonly options: TrackerOptions,
  ) {}

  /** Starts the tracker and resolves once the replay has caught up (and due announcements were made). */
  static async start(config: CompiledConfig, options: TrackerOptions): Promise<Tracker> {
    const tracker = new Tracker(config, options);
    const connection = options.connection ?? (tracker.ownConnection = await openConnection(config, options.log, 'stagecoach-tracker'));
    if (options.announce !== false) {
      tracker.events = new EventPublisher(config, { source: 'stagecoach/tracker', log: options.log, connection: () => connection });
    }
    tracker.reader = await TrackingReader.open(connection, config, options.log, (record) => tracker.onRecord(record));
    await tracker.reader.caughtUp();
    tracker.live = options.announce !== false;
    // Batches that completed while no tracker ran, and were never announced.
    if (tracker.live) for (const batch of tracker.fold.batches.values()) if (isComplete(batch)) tracker.announce(batch);
    await tracker.settled();
    options.log.info('tracker caught up', { batches: tracker.fold.batches.size, jobs: tracker.fold.jobs.size });
    return tracker;
  }

  /** A batch's state, or undefined when no report named it. */
  batch(id: string): TrackedBatch | undefined {
    return this.fold.batches.get(id);
  }

  /** Resolves once every record published before the call is folded in (tests, status). */
  async sync(): Promise<void> {
    await this.reader?.caughtUp();
    await this.settled();
  }

  async close(): Promise<void> {
    await this.settled();
    await this.reader?.close();
    await this.events?.close();
    if (this.ownConnection !== undefined) await this.ownConnection.close().catch(() => undefined);
  }

  private onRecord(record: TrackingRecord): void {
    const result = this.fold.apply(record);
    if (result.refused !== undefined) {
      this.options.log.warn('tracking report refused', { reason: result.refused, ...('job' in record ? { job_id: record.job } : {}) });
    }
    if (result.completed !== undefined && this.live) this.announce(result.completed);
  }

  private announce(batch: TrackedBatch): void {
    if (batch.announced || this.announced.has(batch.id)) return;
    this.announced.add(batch.id);
    const { counts } = batch;
    const work = (async () => {
      await this.events?.publish('batch.completed', batch.id, {
        batch: batch.id,
        ...(batch.tenant === undefined ? {} : { tenant: batch.tenant }),
        jobs: { ...counts },
        failed: counts.failed > 0,
      });
      await this.reader?.append(stamp<AnnouncedReport>({ kind: 'announced', batch: batch.id }));
      this.options.log.info('batch completed', { batch: batch.id, tenant: batch.tenant, ...counts });
      this.options.onCompleted?.(batch);
    })().catch((err: unknown) => {
      this.options.log.warn('batch completion not recorded', { batch: batch.id, err: (err as Error).message });
    });
    this.pending.add(work);
    void work.finally(() => this.pending.delete(work));
  }

  private async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}

/**
 * Reads the whole tracking stream up to now into a fold and stops: what `batch status`,
 * `batch list` and `job status` show (no running tracker needed; see docs/batches.md).
 */
export async function readTracking(config: CompiledConfig, log: Logger): Promise<BatchFold> {
  const connection = await openConnection(config, log, 'stagecoach-batch-status');
  try {
    const fold = new BatchFold();
    const reader = await TrackingReader.open(connection, config, log, (record) => fold.apply(record));
    await reader.caughtUp();
    await reader.close();
    return fold;
  } finally {
    await connection.close().catch(() => undefined);
  }
}
