import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { ReopeningPublisher } from '../broker/reopening-publisher.js';
import { declareTopology } from '../broker/declare-topology.js';
import { JobRouter, typeAllowed } from '../broker/job-router.js';
import { payloadOffloaderFor, type PayloadOffloader } from '../payload/payload-offloader.js';
import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { ConfigError, StagecoachError, TenantRequiredError } from '../errors/errors.js';
import { EventPublisher } from '../events/event-publisher.js';
import { QueueFullReporter } from '../events/queue-full-reporter.js';
import { createJob } from '../job/envelope.js';
import type { BatchCallbacks, HeaderValue, Job, PublishSpec } from '../job/job.types.js';
import { holdPending } from './pending-hold.js';
import { RouteWatch } from './route-watch.js';
import { childTraceparent } from '../job/trace-context.js';
import { createLogger, type Logger } from '../logging/logger.js';
import { coreTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import { settingsFor } from '../config/queue-resolver.js';
import { checkBatchId } from '../util/batch-id.js';
import { checkQueueName } from '../util/queue-name.js';
import { stamp, type CreatedReport, type SettledReport } from '../tracking-stream/tracking-report.js';
import { batchOf, publishRecord } from '../tracking-stream/tracking-stream.js';
import { checkCallbacks } from '../batch/batch-callbacks.js';
import { runEnqueueChain } from '../stage/middleware/enqueue-chain.js';
import { middlewareLists } from '../stage/middleware/middleware-lists.js';
import type { EnqueueMiddleware, Middleware } from '../stage/middleware/middleware.types.js';
import { uniqueGateFor, type UniqueHost } from '../job-state/unique/unique-gate.js';
import type { DirectiveRecord } from '../tracking-stream/tracking-report.js';
import type { WorkflowSpec } from '../job/workflow.types.js';
import { workflowRecord, type WorkflowStartOptions } from '../workflow/workflow-start.js';

/**
 * Enqueues jobs from any program (OJS PUSH). Each `publish()` resolves with the job id once
 * the broker has confirmed the job; a job no queue takes yet is kept in `ojs.unroutable`, and
 * `publish()` rejects with an `UnroutableJobError` (`UNROUTABLE`) naming why (route-watch.ts). A job
 * a full queue refuses (`max_size`, `overflow_policy` `reject`) rejects with a `QueueFullError`
 * (`QUEUE_FULL`), and the publisher reports `queue.full` on `<prefix>.events` (throttled: see
 * events/queue-full-reporter.ts).
 *
 * A job published with a `batch` starts in that batch: the publisher first reports it as
 * created to the tracking stream (confirmed), so a tracker never sees the batch complete before
 * its root job ran (docs/batches.md). Its `callbacks` (OJS batch callbacks) ride in that report:
 * the tracker publishes them when the batch completes.
 *
 * Enqueue middleware (`middleware.enqueue`, docs/middleware.md) runs on every job `publish()` or
 * `send()` is given, in order, before anything of it reaches the broker: it may add `meta` and
 * headers, or refuse the job by throwing (nothing is then published, and the error is the
 * caller's).
 *
 * ```ts
 * const publisher = await Publisher.connect(await loadConfig('config/pipeline.json'));
 * const id = await publisher.publish('scan-specs', { type: 'scan.folder', args: ['docs'], tenant: 'acme' });
 * await publisher.close();
 * ```
 */
export class Publisher {
  private readonly router: JobRouter;

  private constructor(
    private readonly config: CompiledConfig,
    private readonly connection: AmqpConnection,
    private readonly publisher: ReopeningPublisher,
    private readonly ownsConnection: boolean,
    private readonly events: EventPublisher,
    private readonly payloads: PayloadOffloader,
    private readonly ownsPayloads: boolean,
    private readonly enqueue: readonly EnqueueMiddleware[],
    private readonly routes: RouteWatch,
  ) {
    this.router = new JobRouter(config, publisher, payloads);
  }

  /**
   * Opens a publisher. The entry exchanges (`root`, `direct`, `unroutable`) are declared first,
   * so publishing works before any stage has started. With `security.tenantUsers` nothing is
   * declared (a producer user may not; `provision` did) and jobs carry the validated `user_id`
   * of the connection's user (see `routeFor` for where they enter).
   * @param connection an open connection to share; by default the publisher opens its own.
   * @param source the `source` of its events (`stagecoach/publisher` by default).
   * @param payloads where arguments above `payloads.threshold` go (docs/payloads.md); by default
   *   the configured store, which `close()` closes.
   * @param middleware `enqueue`: middleware every job passes, in order, before it is published.
   */
  static async connect(
    config: CompiledConfig,
    options: {
      connection?: AmqpConnection;
      log?: Logger;
      source?: string;
      payloads?: PayloadOffloader;
      middleware?: Pick<Middleware, 'enqueue'>;
    } = {},
  ): Promise<Publisher> {
    // Checked before anything is opened: a bad entry must not leave a connection behind.
    const { enqueue } = middlewareLists('Publisher', options.middleware);
    const log = options.log ?? createLogger({ component: 'publisher' });
    const connection = options.connection ?? (await openConnection(config, log, 'stagecoach-publisher'));
    if (!config.security.tenantUsers) await declareTopology(connection, coreTopology(config), log);
    const events = new EventPublisher(config, { source: options.source ?? 'stagecoach/publisher', log, connection: () => connection });
    const publisher = await ReopeningPublisher.open(connection, new QueueFullReporter(config, events).observe);
    const payloads = options.payloads ?? payloadOffloaderFor(config, log);
    return new Publisher(
      config,
      connection,
      publisher,
      options.connection === undefined,
      events,
      payloads,
      options.payloads === undefined,
      enqueue,
      new RouteWatch(connection, config, log),
    );
  }

  /**
   * Builds the envelope (UUIDv7 id, attempt 1) and publishes it; resolves with the job id, or,
   * for a unique job whose duplicate is ignored (`on_conflict: "ignore"`), the first job's.
   */
  async publish(queue: string, spec: PublishSpec): Promise<string> {
    return this.send(this.build(queue, spec), spec);
  }

  /**
   * Builds the envelope `publish()` would send, without sending it.
   * @throws TenantRequiredError for a tenant-scoped queue without a tenant, TenantError for a
   * tenant that is not a slug (`createJob` checks it): `publish()` then sends nothing.
   */
  build(queue: string, spec: PublishSpec): Job {
    checkQueueName(queue, 'queue');
    if (queueFor(this.config, queue).scope === 'tenant' && spec.tenant === undefined) throw new TenantRequiredError(queue);
    return createJob(spec, {
      queue,
      ...(spec.tenant === undefined ? {} : { tenant: spec.tenant }),
      ...(spec.batch === undefined ? {} : { batch: checkBatchId(spec.batch, 'batch') }),
    });
  }

  /**
   * Publishes an envelope (its id and attempt kept), once the enqueue middleware let it through.
   * A batched one (`meta.batch`) is reported as created first, with the batch's `callbacks` when
   * given; when the job itself then fails to publish, a `discarded` report follows (best effort),
   * so the batch does not wait for a job that never was.
   * @throws StagecoachError `INVALID_REQUEST` for callbacks without a batch or that could not be
   * published for the batch's tenant (see checkedCallbacks), before anything is sent; whatever
   * an enqueue middleware throws (EnqueueRefusedError for one that did not call `next()`); for a
   * job carrying `unique` (docs/unique-jobs.md), DuplicateJobError when its key is held, and
   * INVALID_REQUEST without the PostgreSQL job store.
   * @returns the job's id, or the id of the job holding its uniqueness key (`on_conflict: "ignore"`: nothing was published).
   */
  async send(job: Job, spec: Pick<PublishSpec, 'headers' | 'traceparent' | 'callbacks' | 'pending'> = {}): Promise<string> {
    return runEnqueueChain(this.enqueue, job, spec.headers, (sent, headers) => {
      const publish = (): Promise<void> => this.publishEnvelope(sent, { ...spec, ...(headers === undefined ? {} : { headers }) });
      // After the middleware, which may have added or changed `unique`.
      return sent.unique === undefined ? publish() : uniqueGateFor(this.config).admit(sent, this.uniqueHost, publish);
    });
  }

  /** A physical queue's ready jobs (what its `max_size` counts), or undefined when the broker does not answer. */
  readyMessages(physicalQueue: string): Promise<number | undefined> {
    return this.publisher.readyMessages(physicalQueue);
  }

  /**
   * Starts a workflow (docs/workflows.md): `publisher.workflow(chain(a, group(b, c), d), { tenant })`.
   * Its definition is checked against the configuration before anything is sent; then the record
   * that starts it is appended to the tracking stream, and this resolves with the workflow's id
   * (also its batch's) once the broker confirmed it. The process holding the workflow lock (a
   * `stagecoach tracker`, the admin server) publishes its steps: without one, it waits.
   * @throws StagecoachError `INVALID_REQUEST` naming what is wrong in the definition.
   */
  async workflow(spec: WorkflowSpec, options: WorkflowStartOptions = {}): Promise<string> {
    const record = workflowRecord(this.config, spec, options);
    await publishRecord(this.publisher, new BrokerNames(this.config.prefix).tracking, record);
    return record.workflow;
  }

  /** How the unique-jobs gate sees this publisher: its tracking settings, and a cancel on its channel. */
  private readonly uniqueHost: UniqueHost = {
    tracked: (job) => this.tracked(job),
    cancel: async (record: DirectiveRecord) => {
      const names = new BrokerNames(this.config.prefix);
      await publishRecord(this.publisher, names.jobCancels, record);
      await publishRecord(this.publisher, names.tracking, record);
    },
  };

  /** The end of `send()`: the envelope as the middleware left it, reported (when batched) and published. */
  private async publishEnvelope(job: Job, spec: Pick<PublishSpec, 'headers' | 'traceparent' | 'callbacks' | 'pending'>): Promise<void> {
    const batch = batchOf(job);
    const callbacks = spec.callbacks === undefined ? undefined : this.checkedCallbacks(spec.callbacks, job, batch);
    const stream = new BrokerNames(this.config.prefix).tracking;
    let created: CreatedReport | undefined;
    let reported: Promise<void> | undefined;
    // A pending job is always reported: its state is what ACTIVATE reads.
    if (batch !== undefined || this.tracked(job) || spec.pending === true) {
      created = stamp<CreatedReport>({
        kind: 'created',
        job: job.id,
        ...(batch === undefined ? {} : { batch: checkBatchId(batch, 'meta.batch') }),
        ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
        queue: job.queue,
        type: job.type,
        ...(job.scheduled_at === undefined ? {} : { scheduled_at: job.scheduled_at }),
        ...(callbacks === undefined ? {} : { callbacks }),
        ...(job.tags === undefined ? {} : { tags: job.tags }),
        // A producer that names the job it works for (an HTTP worker pushing its outputs).
        ...(typeof job.meta.parent_id === 'string' ? { parent: job.meta.parent_id } : {}),
        ...(spec.pending === true ? { pending: true } : {}),
      });
      reported = publishRecord(this.publisher, stream, created);
      // A batch's root is reported before it is sent (no tracker may see the batch end before its
      // root ran); a job tracked by its queue alongside (the job store's fold does not depend on
      // the order, docs/job-state.md), so tracking costs no second round trip.
      if (batch !== undefined) await reported;
    }
    // Whether a queue takes it, checked while it is on its way (route-watch.ts). A scheduled job
    // takes its route when due, a pending one when activated: neither is checked here.
    const route = job.scheduled_at === undefined && spec.pending !== true ? this.routes.check(job) : undefined;
    route?.catch(() => undefined);
    try {
      const wire = {
        traceparent: spec.traceparent ?? childTraceparent(),
        ...(spec.headers === undefined ? {} : { headers: spec.headers }),
      };
      const sent = spec.pending === true ? holdPending(this.config, this.publisher, job, wire) : this.router.send(job, wire);
      // Observed at once: awaited after the job (a failed report does not make a sent job unsent).
      reported?.catch(() => undefined);
      await sent;
    } catch (err) {
      if (created !== undefined) {
        const unsent = stamp<SettledReport>({
          kind: 'settled',
          job: job.id,
          ...(created.batch === undefined ? {} : { batch: created.batch }),
          ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
          stage: 'publisher',
          queue: job.queue,
          type: job.type,
          outcome: 'discarded',
          attempt: job.attempt,
          error: { type: 'PUBLISH_FAILED', message: (err as Error).message },
        });
        await publishRecord(this.publisher, stream, unsent).catch(() => undefined);
      }
      throw err;
    }
    await reported;
    await route;
  }

  /**
   * Sends a job held pending (decoded from the parked queue, see http-api/http-binding/pending-jobs.ts)
   * on to its queue as `publish()` would have, and reports it created again, not pending: the
   * job store shows it `available` (or `scheduled`). Its middleware and uniqueness ran when it
   * was pushed. @throws what sending throws (QueueFullError...): the caller keeps it held then.
   */
  async activate(job: Job, wire: { traceparent?: string; headers?: Record<string, HeaderValue> }): Promise<void> {
    await this.router.send(job, wire);
    const created = stamp<CreatedReport>({
      kind: 'created',
      job: job.id,
      ...(batchOf(job) === undefined ? {} : { batch: batchOf(job) }),
      ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
      queue: job.queue,
      type: job.type,
      ...(job.scheduled_at === undefined ? {} : { scheduled_at: job.scheduled_at }),
      ...(job.tags === undefined ? {} : { tags: job.tags }),
    });
    await publishRecord(this.publisher, new BrokerNames(this.config.prefix).tracking, created);
  }

  /** `tracking` per queue and tenant, resolved once (the configuration does not change under a Publisher). */
  private readonly tracking = new Map<string, boolean>();

  /** Whether the job's queue has `tracking` on for its tenant (docs/job-state.md). */
  private tracked(job: Job): boolean {
    const key = `${job.queue}\u0000${job.tenant ?? ''}`;
    let on = this.tracking.get(key);
    if (on === undefined) {
      on = settingsFor(this.config, job.queue, job.tenant).tracking !== false;
      if (this.tracking.size >= 10_000) this.tracking.clear();
      this.tracking.set(key, on);
    }
    return on;
  }

  /**
   * The callbacks of a batch's root, checked as far as they can be before the batch ends: their
   * shape, and that each could be published then by the tracker for the batch's tenant (the
   * root's): a configured queue under `strict_queues`, a tenant for a tenant-scoped queue, no
   * other tenant than the batch's (the tracker must not publish for a tenant the producer may not
   * act for).
   */
  private checkedCallbacks(declared: BatchCallbacks, job: Job, batch: string | undefined): BatchCallbacks {
    if (batch === undefined) throw new StagecoachError('INVALID_REQUEST', 'callbacks: only a job started in a batch can name callbacks');
    const callbacks = checkCallbacks(declared, 'callbacks');
    for (const [name, callback] of Object.entries(callbacks)) {
      const where = `callbacks.${name}`;
      if (callback.tenant !== undefined && callback.tenant !== job.tenant) {
        throw new StagecoachError(
          'INVALID_REQUEST',
          `${where}: "tenant" "${callback.tenant}" is not the batch's tenant (${job.tenant === undefined ? 'none' : `"${job.tenant}"`}): a callback runs for its batch's tenant`,
        );
      }
      let queue: ResolvedQueueConfig;
      try {
        queue = queueFor(this.config, callback.queue, 'a batch callback');
      } catch (err) {
        if (err instanceof ConfigError) throw new StagecoachError('INVALID_REQUEST', `${where}: ${err.message}`, { cause: err });
        throw err;
      }
      if (!typeAllowed(queue.allowed_job_types, callback.type)) {
        throw new StagecoachError('INVALID_REQUEST', `${where}: queue "${callback.queue}" does not allow job type "${callback.type}"`);
      }
      if (queue.scope === 'tenant' && job.tenant === undefined) {
        throw new StagecoachError('INVALID_REQUEST', `${where}: queue "${callback.queue}" is tenant-scoped and the batch has no tenant`);
      }
    }
    return callbacks;
  }

  async close(): Promise<void> {
    // Its events first: a `queue.full` of the last refusal is still on its way.
    await this.events.close();
    await this.routes.close();
    await this.publisher.close();
    if (this.ownsPayloads) await this.payloads.store.close();
    if (this.ownsConnection) await this.connection.close().catch(() => undefined);
  }
}
