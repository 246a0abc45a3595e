import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import { EventPublisher } from '../events/event-publisher.js';
import type { Logger } from '../logging/logger.js';
import { coreTopology } from '../topology/build-topology.js';
import { BatchFold, batchState, isComplete, type FoldResult, type TrackedBatch } from '../batch/batch-fold.js';
import { identitiesOf } from '../security/broker-users.js';
import { withTrustedCallbacks, type BatchEnd } from '../batch/batch-callbacks.js';
import { CallbackPublisher } from '../batch/callback-publisher.js';
import { stamp, type AnnouncedReport, type CreatedReport, type TrackingRecord } from '../tracking-stream/tracking-report.js';
import { TrackingReader } from '../tracking-stream/tracking-reader.js';
import { createJobStore, retentionOf } from '../job-state/create-job-store.js';
import { MemoryJobStore } from '../job-state/memory-job-store.js';
import type { JobStore } from '../job-state/job-store.js';
import { jobRecordOf, StoreWriter } from '../job-state/store-writer.js';

/** What a tracker lends its plugins once its replay caught up. */
export interface TrackerHost {
  /** The tracker's connection: a plugin's channels go with it. */
  connection: AmqpConnection;
  /** Resolves once every record appended before the call was handed to the fold and the plugins. */
  caughtUp(): Promise<void>;
}

/**
 * Work that rides on a tracker's reading of the stream (the workflow advancer, src/workflow): told
 * of every record after the batch fold took it, in stream order, during the replay and after.
 */
export interface TrackerPlugin {
  onRecord(record: TrackingRecord, result: FoldResult): void;
  /** The replay has caught up: from here on the plugin may act. */
  start(host: TrackerHost): void;
  /** Resolves once the work the records so far started is done (Tracker.sync). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export interface TrackerOptions {
  log: Logger;
  /** Made with the tracker's fold, before any record is read (see TrackerPlugin). */
  plugins?: ReadonlyArray<(fold: BatchFold) => TrackerPlugin>;
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
  /**
   * Where job states are folded (docs/job-state.md): by default the PostgreSQL store when
   * `tracking.store` names it, else none; `false` for none.
   */
  jobs?: JobStore | false;
  /** How often ended jobs past their retention are pruned from the store. @defaultValue PRUNE_EVERY_MS */
  pruneEveryMs?: number;
}

/** How often a tracker prunes the job store by default (queues' `retention`). */
export const PRUNE_EVERY_MS = 60_000;

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
  readonly plugins: readonly TrackerPlugin[];
  private reader: TrackingReader | undefined;
  private live = false;
  private readonly announced = new Set<string>();
  private readonly pending = new Set<Promise<void>>();
  private events: EventPublisher | undefined;
  private callbacks: CallbackPublisher | undefined;
  private ownConnection: AmqpConnection | undefined;
  /** Job states (docs/job-state.md): every created, settled and job-cancel record goes there in batches. */
  private readonly writer: StoreWriter | undefined;
  private pruner: NodeJS.Timeout | undefined;

  private constructor(
    private readonly config: CompiledConfig,
    private readonly options: TrackerOptions,
  ) {
    // A memory store is kept only where something reads it (the admin API's follower passes one):
    // `stagecoach tracker`'s own would only grow, since `job status` replays the stream itself.
    const jobs = options.jobs ?? (config.tracking.store.kind === 'postgres' ? createJobStore(config) : false);
    if (jobs !== false) this.writer = new StoreWriter(jobs, options.log);
    this.plugins = (options.plugins ?? []).map((make) => make(this.fold));
  }

  /** The job store it writes, if any. */
  get jobs(): JobStore | undefined {
    return this.writer?.store;
  }

  /** Drops the ended jobs past their retention. @returns how many. */
  async prune(now = new Date()): Promise<number> {
    const store = this.writer?.store;
    if (store === undefined) return 0;
    const pruned = await store.prune(now);
    if (pruned > 0) this.options.log.info('job store pruned', { jobs: pruned });
    return pruned;
  }

  /** Starts the tracker and resolves once the replay has caught up (and due announcements were made). */
  static async start(config: CompiledConfig, options: TrackerOptions): Promise<Tracker> {
    const tracker = new Tracker(config, options);
    const connection = options.connection ?? (tracker.ownConnection = await openConnection(config, options.log, 'stagecoach-tracker'));
    if (options.announce !== false) {
      tracker.events = new EventPublisher(config, { source: 'stagecoach/tracker', log: options.log, connection: () => connection });
      // Callback jobs enter by the root and direct exchanges, as a Publisher's do (with tenant users
      // `provision` declared them: the tracker's user may not).
      if (!config.security.tenantUsers) await declareTopology(connection, coreTopology(config), options.log);
      tracker.callbacks = new CallbackPublisher(config, connection, options.log);
    }
    tracker.reader = await TrackingReader.open(connection, config, options.log, (record, userId) => tracker.onRecord(record, userId));
    await tracker.reader.caughtUp();
    tracker.live = options.announce !== false;
    // Batches that completed while no tracker ran, and were never announced.
    if (tracker.live) for (const batch of tracker.fold.batches.values()) if (isComplete(batch)) tracker.announce(batch);
    await tracker.settled();
    await tracker.writer?.written();
    const reader = tracker.reader;
    for (const plugin of tracker.plugins) plugin.start({ connection, caughtUp: () => reader.caughtUp() });
    options.log.info('tracker caught up', { batches: tracker.fold.batches.size, jobs: tracker.fold.jobs.size });
    if (tracker.writer !== undefined) {
      // A replay brings back jobs pruned before the restart (the stream keeps longer): pruned again at once.
      const prune = (): void =>
        void tracker.prune().catch((err: unknown) => options.log.warn('job store not pruned', { err: (err as Error).message }));
      prune();
      tracker.pruner = setInterval(prune, options.pruneEveryMs ?? PRUNE_EVERY_MS);
      tracker.pruner.unref();
    }
    return tracker;
  }

  /** A batch's state (the tenant's batch of that id; see BatchFold.batch), or undefined when no report named it. */
  batch(id: string, tenant?: string): TrackedBatch | undefined {
    return this.fold.batch(id, tenant);
  }

  /** Resolves once every record published before the call is folded in (tests, status). */
  async sync(): Promise<void> {
    await this.reader?.caughtUp();
    await this.settled();
    await Promise.all(this.plugins.map((plugin) => plugin.settled()));
    await this.writer?.written();
  }

  async close(): Promise<void> {
    // Callbacks waiting to be tried again give up (their batch is announced again by the next
    // tracker); announcements under way finish.
    this.callbacks?.stop();
    clearInterval(this.pruner);
    for (const plugin of this.plugins) await plugin.close().catch(() => undefined);
    await this.settled();
    await this.callbacks?.close();
    await this.reader?.close();
    await this.events?.close();
    await this.writer?.close();
    await this.writer?.store.close();
    if (this.ownConnection !== undefined) await this.ownConnection.close().catch(() => undefined);
  }

  private onRecord(record: TrackingRecord, userId: string | undefined): void {
    const trusted = trustedRecord(this.config, record, userId, this.options.log);
    this.writer?.add(trusted);
    const result = this.fold.apply(trusted);
    for (const plugin of this.plugins) plugin.onRecord(trusted, result);
    if (result.refused !== undefined) {
      this.options.log.warn('tracking report refused', { reason: result.refused, ...('job' in record ? { job_id: record.job } : {}) });
    }
    if (result.completed !== undefined && this.live) this.announce(result.completed);
  }

  private announce(batch: TrackedBatch): void {
    if (batch.announced || this.announced.has(batch.key)) return;
    this.announced.add(batch.key);
    // The counts and the end as they are now: a late root may change them before the work runs.
    const counts = { ...batch.counts };
    // A cancelled batch runs on_complete only.
    const state = batchState(batch);
    const end: BatchEnd = { cancelled: state === 'cancelled', failed: counts.failed };
    const work = (async () => {
      const callbacks = (await this.callbacks?.run(batch, end, counts)) ?? {};
      await this.events?.publish('batch.completed', batch.id, {
        batch: batch.id,
        ...(batch.tenant === undefined ? {} : { tenant: batch.tenant }),
        state,
        jobs: counts,
        failed: counts.failed > 0,
        ...(Object.keys(callbacks).length === 0 ? {} : { callbacks }),
      });
      await this.reader?.append(
        stamp<AnnouncedReport>({ kind: 'announced', batch: batch.id, ...(batch.tenant === undefined ? {} : { tenant: batch.tenant }) }),
      );
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
export async function readTracking(config: CompiledConfig, log: Logger, jobs?: MemoryJobStore): Promise<BatchFold> {
  const connection = await openConnection(config, log, 'stagecoach-batch-status');
  try {
    const fold = new BatchFold();
    const reader = await TrackingReader.open(connection, config, log, (record, userId) => {
      const trusted = trustedRecord(config, record, userId, log);
      const job = jobs === undefined ? undefined : jobRecordOf(trusted);
      if (job !== undefined) jobs?.applyNow([job]);
      fold.apply(trusted);
    });
    await reader.caughtUp();
    await reader.close();
    return fold;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/**
 * The job store as `job status|list|cancel` read it (docs/job-state.md): the PostgreSQL table
 * itself, or, with the memory store, the tracking stream replayed into a fresh one (no tracker
 * needed). Closed by the caller.
 */
export async function readJobStore(config: CompiledConfig, log: Logger): Promise<JobStore> {
  if (config.tracking.store.kind === 'postgres') return createJobStore(config);
  const store = new MemoryJobStore(retentionOf(config));
  await readTracking(config, log, store);
  await store.prune(new Date());
  return store;
}

/**
 * What of a record is taken, with `security.tenantUsers`, by who wrote it (its broker-validated
 * `user_id`). Callbacks only from a `created` record whose user could write it for the batch's
 * tenant: the tracker publishes them with its own (trusted) user, so a tenant's producer must not
 * make it publish jobs for another tenant; the record still counts. A directive or `announced`
 * record only from the operator or the internal user (an `announced` one ends a batch's announcing) (batch-directives.ts): it changes a batch's state word. A
 * `created`, `settled` or `progress` record only from a user that may act for the tenant it names (that
 * tenant's producer or stage user, the internal user, the operator): a tenant user cannot settle,
 * create or kill jobs in another tenant's batch. Without tenant users every record is taken.
 */
export function trustedRecord(config: CompiledConfig, record: TrackingRecord, userId: string | undefined, log: Logger): TrackingRecord {
  if (!config.security.tenantUsers) return record;
  const identities = identitiesOf(config);
  if ((record.kind === 'directive' || record.kind === 'announced') && !(userId !== undefined && identities.trusted(userId))) {
    log.warn(`batch ${record.kind} record ignored: not written by the operator or the internal user`, { ...record, user_id: userId });
    return { kind: 'mark', id: record.id, at: record.at };
  }
  if (
    (record.kind === 'settled' || record.kind === 'created' || record.kind === 'workflow' || record.kind === 'progress') &&
    !identities.mayActFor(record.tenant, userId)
  ) {
    log.warn('tracking record ignored: its broker user may not act for the tenant it names', {
      batch: record.kind === 'workflow' ? record.workflow : record.kind === 'progress' ? undefined : record.batch,
      ...(record.kind === 'workflow' ? {} : { job_id: record.job }),
      tenant: record.tenant,
      user_id: userId,
    });
    return { kind: 'mark', id: record.id, at: record.at };
  }
  const trusted = withTrustedCallbacks(config, record, userId);
  if (trusted !== record) {
    log.warn('batch callbacks ignored: written by a broker user that may not act for the batch tenant', {
      batch: (record as CreatedReport).batch,
      tenant: (record as CreatedReport).tenant,
      user_id: userId,
    });
  }
  return trusted;
}
