import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import { EventPublisher } from '../events/event-publisher.js';
import type { Logger } from '../logging/logger.js';
import { coreTopology } from '../topology/build-topology.js';
import { BatchFold, batchState, isComplete, type TrackedBatch } from './batch-fold.js';
import { withTrustedCallbacks, type BatchEnd } from './batch-callbacks.js';
import { CallbackPublisher } from './callback-publisher.js';
import { stamp, type AnnouncedReport, type CreatedReport, type TrackingRecord } from './tracking-report.js';
import { TrackingReader } from './tracking-reader.js';

export interface TrackerOptions {
  log: Logger;
  /** An open connection to use; by default the tracker opens (and closes) its own. */
  connection?: AmqpConnection;
  /** Told of every batch announced (tests, the CLI's log line). */
  onCompleted?: (batch: TrackedBatch) => void;
}

/**
 * `stagecoach tracker` as a library class: replays the tracking stream from its first offset
 * into a {@link BatchFold}, then follows it. When a batch completes it announces it: publishes
 * the batch's callback jobs (OJS `on_complete` / `on_success` / `on_failure`, see
 * CallbackPublisher), then `batch.completed` on `<prefix>.events` (routing key
 * `batch.completed`, subject the batch id, data `{ batch, tenant, jobs, failed, callbacks? }`),
 * then appends an `announced` record to the stream.
 *
 * Announcements: at most once per tracker instance, and not again after a restart, because the
 * replay reads the `announced` records; nothing is announced before the replay caught up with
 * the stream as it was at start. The callbacks and the event go before the record, so a crash
 * between them announces the batch again after the restart, callbacks included (at-least-once
 * across crashes; a callback job keeps its id, so consumers can drop the repeat), and two
 * trackers running at once may both announce a batch (docs/batches.md).
 */
export class Tracker {
  readonly fold = new BatchFold();
  private reader: TrackingReader | undefined;
  private live = false;
  private readonly announced = new Set<string>();
  private readonly pending = new Set<Promise<void>>();
  private events: EventPublisher | undefined;
  private callbacks: CallbackPublisher | undefined;
  private ownConnection: AmqpConnection | undefined;

  private constructor(
    private readonly config: CompiledConfig,
    private readonly options: TrackerOptions,
  ) {}

  /** Starts the tracker and resolves once the replay has caught up (and due announcements were made). */
  static async start(config: CompiledConfig, options: TrackerOptions): Promise<Tracker> {
    const tracker = new Tracker(config, options);
    const connection = options.connection ?? (tracker.ownConnection = await openConnection(config, options.log, 'stagecoach-tracker'));
    tracker.events = new EventPublisher(config, { source: 'stagecoach/tracker', log: options.log, connection: () => connection });
    // Callback jobs enter by the root and direct exchanges, as a Publisher's do (with tenant users
    // `provision` declared them: the tracker's user may not).
    if (!config.security.tenantUsers) await declareTopology(connection, coreTopology(config), options.log);
    tracker.callbacks = new CallbackPublisher(config, connection, options.log);
    tracker.reader = await TrackingReader.open(connection, config, options.log, (record, userId) => tracker.onRecord(record, userId));
    await tracker.reader.caughtUp();
    tracker.live = true;
    // Batches that completed while no tracker ran, and were never announced.
    for (const batch of tracker.fold.batches.values()) if (isComplete(batch)) tracker.announce(batch);
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
    // Callbacks waiting to be tried again give up (their batch is announced again by the next
    // tracker); announcements under way finish.
    this.callbacks?.stop();
    await this.settled();
    await this.callbacks?.close();
    await this.reader?.close();
    await this.events?.close();
    if (this.ownConnection !== undefined) await this.ownConnection.close().catch(() => undefined);
  }

  private onRecord(record: TrackingRecord, userId: string | undefined): void {
    const result = this.fold.apply(this.trusted(record, userId));
    if (result.refused !== undefined) {
      this.options.log.warn('tracking report refused', { reason: result.refused, ...('job' in record ? { job_id: record.job } : {}) });
    }
    if (result.completed !== undefined && this.live) this.announce(result.completed);
  }

  /**
   * With `security.tenantUsers`, callbacks are taken only from a `created` record its broker user
   * could write for the batch's tenant: the tracker publishes them with its own (trusted) user, so
   * a tenant's producer must not make it publish jobs for another tenant. The record still counts.
   */
  private trusted(record: TrackingRecord, userId: string | undefined): TrackingRecord {
    const trusted = withTrustedCallbacks(this.config, record, userId);
    if (trusted !== record) {
      this.options.log.warn('batch callbacks ignored: written by a broker user that may not act for the batch tenant', {
        batch: (record as CreatedReport).batch,
        tenant: (record as CreatedReport).tenant,
        user_id: userId,
      });
    }
    return trusted;
  }

  private announce(batch: TrackedBatch): void {
    if (batch.announced || this.announced.has(batch.id)) return;
    this.announced.add(batch.id);
    // The counts and the end as they are now: a late root may change them before the work runs.
    const counts = { ...batch.counts };
    // 'cancelled' once `batch cancel` exists: a cancelled batch runs on_complete only.
    const end: BatchEnd = { cancelled: (batchState(batch) as string) === 'cancelled', failed: counts.failed };
    const work = (async () => {
      const callbacks = (await this.callbacks?.run(batch, end, counts)) ?? {};
      await this.events?.publish('batch.completed', batch.id, {
        batch: batch.id,
        ...(batch.tenant === undefined ? {} : { tenant: batch.tenant }),
        jobs: counts,
        failed: counts.failed > 0,
        ...(Object.keys(callbacks).length === 0 ? {} : { callbacks }),
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
