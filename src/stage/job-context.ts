import type { JobSink } from '../broker/job-router.js';
import { StagecoachError, UnknownOutputError } from '../errors/errors.js';
import { OJS_HEADERS } from '../job/amqp-mapping.js';
import { createJob } from '../job/envelope.js';
import { stamp, type CreatedReport, type SettledReport, type TrackingRecord } from '../tracking-stream/tracking-report.js';
import { toJobError } from '../job/job-error.js';
import type { EmitSpec, HeaderValue, Job } from '../job/job.types.js';
import { checkBatchId } from '../util/batch-id.js';
import { traceIdOf } from '../job/trace-context.js';
import { traceparentForEmit } from '../observability/tracing.js';
import type { Logger } from '../logging/logger.js';
import { runEnqueueChain } from './middleware/enqueue-chain.js';
import type { EnqueueMiddleware } from './middleware/middleware.types.js';
import { NEVER_ABORTED } from './never-aborted.js';
import type { UniqueGate, UniqueHost } from '../job-state/unique/unique-gate.js';
import type { StageContext } from './stage.types.js';
import type { WorkflowSpec } from '../job/workflow.types.js';
import { emittedWorkflowId } from '../workflow/workflow-plan.js';
import { startRecord } from '../workflow/workflow-start.js';
import { jobNodes, planOf } from '../workflow/workflow-plan.js';

function ignore(): void {}

/** The unique-jobs gate of a stage process, and how it sees the stage (docs/unique-jobs.md). */
export interface UniqueEnqueue {
  gate: UniqueGate;
  host: UniqueHost;
}

/**
 * The context of one delivery. Lifecycle: created before `handle()`; closed by the settlement on
 * every outcome (`settle()` after a return, `close()` after a failure or timeout); `emit()`
 * after that is an error, because the input is being acknowledged or retried. When the delivery
 * is lost (`lost` aborts: its channel died), `signal` aborts with the loss and `emit()` is
 * refused with it: the broker delivers the job again, so nothing more of this run is published.
 */
export class JobContext implements StageContext {
  private readonly pending: Promise<string>[] = [];
  private closed = false;
  /**
   * Abandoned by `close()` (the handler failed or timed out): an emit still waiting for room in a
   * full `block` queue stops, since the job is being retried or dead-lettered. `settle()` leaves
   * it: a returned handler's emits are waited for (up to `block_timeout`), holding the input job.
   */
  private readonly scope = { abandoned: false };
  private logger: Logger | undefined;
  /** The timeout's signal (useSignal), or the one made on first read when the delivery can be lost. */
  private abortSignal: AbortSignal | undefined;
  /** Removes the link from `lost` to the signal made on first read; set while linked. */
  private unlink: (() => void) | undefined;
  /** The job's batch: every job it emits joins it. */
  private readonly batch: string | undefined;
  /**
   * Ids of the jobs emitted, and of those whose publish failed: kept for batched jobs only, whose
   * settlement report lists them (docs/batches.md); undefined otherwise, at no cost.
   */
  readonly children: string[] | undefined;
  readonly unsent: string[] | undefined;
  /** The logical queue of each of `children`, for a tracked job outside a batch (its children's place in the job store). */
  readonly childQueues: string[] | undefined;
  /** What the handler returned (set by invokeHandler; reported with a tracked job's completion, spec/ojs-results.md). */
  result: unknown;
  /** Workflows this run started (`ctx.emit(workflow)`): each one's id is derived from its rank. */
  private workflows = 0;

  constructor(
    readonly stage: string,
    private readonly outputs: readonly string[],
    private readonly job: Job,
    readonly headers: Readonly<Record<string, unknown>>,
    private readonly sink: JobSink,
    private readonly baseLog: Logger,
    /**
     * Aborted when the delivery is lost (its channel's, shared by every delivery on it: handlers
     * never listen to it directly, see `signal`). Undefined where nothing can lose it (the harness).
     */
    private readonly lost: AbortSignal | undefined,
    /** Called when an emitted job is confirmed (metrics). */
    private readonly onPublished?: (output: string) => void,
    /**
     * Appends a record to the tracking stream, confirmed: how an emit that starts a new batch
     * reports its root as created first. Without it, a handler cannot start a batch.
     */
    private readonly track?: (record: TrackingRecord) => Promise<void>,
    /**
     * Enqueue middleware every emitted job passes before it is published: the stage group's, then
     * the stage's (docs/middleware.md). A job it refuses is an emit that failed.
     */
    private readonly enqueue: readonly EnqueueMiddleware[] = [],
    /** The job is tracked by its queue (docs/job-state.md): its children are listed as a batched job's are. */
    tracked = false,
    /** Where an emitted job carrying `unique` claims its key; without it, such a job is refused. */
    private readonly unique?: UniqueEnqueue,
    /** Takes `ctx.progress()` (throttled, src/runner/handling/progress-reporter.ts); without it, progress goes nowhere. */
    private readonly progressTo?: (fraction: number, message?: string) => void,
  ) {
    const batch = job.meta.batch;
    if (typeof batch === 'string') {
      this.batch = batch;
      this.children = [];
      this.unsent = [];
    } else if (tracked) {
      this.children = [];
      this.unsent = [];
      this.childQueues = [];
    }
  }

  /**
   * Aborted when the job runs past its timeout or its delivery is lost. Without a timeout, made
   * on first read (most handlers never read it), linked to the delivery's loss until the context
   * closes; a shared never-aborted signal when nothing can lose the delivery.
   */
  get signal(): AbortSignal {
    if (this.abortSignal !== undefined) return this.abortSignal;
    const lost = this.lost;
    if (lost === undefined) return NEVER_ABORTED;
    const controller = new AbortController();
    this.abortSignal = controller.signal;
    if (lost.aborted) controller.abort(lost.reason);
    else if (!this.closed) {
      const onLost = (): void => controller.abort(lost.reason);
      lost.addEventListener('abort', onLost, { once: true });
      this.unlink = () => lost.removeEventListener('abort', onLost);
    }
    return this.abortSignal;
  }

  /** The job's timeout signal, which the invoker also aborts on loss (set before `handle()` runs). */
  useSignal(signal: AbortSignal): void {
    this.abortSignal = signal;
  }

  /** The delivery's loss signal, for the invoker (see constructor). */
  get lossSignal(): AbortSignal | undefined {
    return this.lost;
  }

  get tenant(): string | undefined {
    return this.job.tenant;
  }

  /** Created on first use: most handlers never log, and a child logger per job is not free. */
  get log(): Logger {
    this.logger ??= this.baseLog.child({
      job_id: this.job.id,
      job_type: this.job.type,
      tenant: this.job.tenant,
      stage: this.stage,
      attempt: this.job.attempt,
      trace_id: traceIdOf(this.headers[OJS_HEADERS.traceparent]),
    });
    return this.logger;
  }

  /**
   * Resolves once the job is handed to the broker's channel (StageContext.emit), or when it is
   * confirmed, whichever comes first (a sink without a channel, a batch's root); rejects when it
   * fails before that. Its confirm is kept in `pending`, which `settle()` waits for: a failure
   * after the hand-over fails the input job there, as a thrown error would.
   */
  emit(output: string, spec: EmitSpec): Promise<string>;
  emit(workflow: WorkflowSpec): Promise<string>;
  emit(target: string | WorkflowSpec, spec?: EmitSpec): Promise<string> {
    if (typeof target !== 'string') return this.startWorkflow(target);
    const output = target;
    const emitted = new Promise<string>((resolve, reject) => {
      const confirmed = this.send(output, spec as EmitSpec, resolve);
      this.pending.push(confirmed);
      confirmed.then(resolve, reject);
    });
    // settle() reports the failure; this keeps an un-awaited emit from crashing the process.
    emitted.catch(ignore);
    return emitted;
  }

  /**
   * `ctx.emit(workflow)`: its record appended (confirmed before the input is acknowledged), with
   * the handled job's tenant, trace and id as its parent, under an id derived from the handled
   * job's and this run's count of workflows, so that a retried handler starts the same one.
   */
  private startWorkflow(spec: WorkflowSpec): Promise<string> {
    const started = (async () => {
      if (this.lost?.aborted === true) throw this.lost.reason as Error;
      if (this.closed) throw new StagecoachError('INVALID_REQUEST', `stage "${this.stage}" started a workflow after its handler returned`);
      if (this.track === undefined) {
        throw new StagecoachError('INVALID_REQUEST', `stage "${this.stage}": cannot start a workflow here (no tracking stream)`);
      }
      const record = startRecord(spec, {
        id: emittedWorkflowId(this.job.id, ++this.workflows),
        ...(this.job.tenant === undefined ? {} : { tenant: this.job.tenant }),
        traceparent: traceparentForEmit(this.headers[OJS_HEADERS.traceparent]),
        parent: this.job.id,
      });
      for (const node of jobNodes(planOf(record.workflow, record.definition))) {
        if (node.spec !== undefined && !this.outputs.includes(node.spec.queue)) {
          throw new UnknownOutputError(this.stage, node.spec.queue, this.outputs);
        }
      }
      await this.track(record);
      return record.workflow;
    })();
    this.pending.push(started);
    started.catch(ignore);
    return started;
  }

  progress(fraction: number, message?: string): void {
    // After the run, a report would describe a settled job: dropped, as a late emit is refused.
    if (!this.closed) this.progressTo?.(fraction, message);
  }

  async confirmed(): Promise<void> {
    const results = await Promise.allSettled(this.pending);
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Closes the context, then waits for every emitted job's confirm. Closing comes first: an
   * emit made while the confirms are awaited (a handler's un-awaited callback firing late) is
   * refused, not published behind the acknowledgement's back.
   * @throws the first emit failure: the input must then not be acknowledged as done.
   */
  async settle(): Promise<number> {
    // Closed, but not abandoned: emits waiting for room in a full `block` queue go on waiting.
    this.closed = true;
    this.unlinkSignal();
    if (this.pending.length === 1) {
      // The common case: one emit, no results array.
      await this.pending[0];
      return 1;
    }
    // Counted now: an emit refused while the confirms are awaited joins `pending` but is no job.
    const emitted = this.pending.length;
    await this.confirmed();
    return emitted;
  }

  /** Refuses further emits: the handler's time is over (it failed, timed out, or was settled). */
  close(): void {
    this.closed = true;
    this.scope.abandoned = true;
    this.unlinkSignal();
  }

  private unlinkSignal(): void {
    this.unlink?.();
    this.unlink = undefined;
  }

  /** @param handedOver called with the job's id once it is on the broker's channel, before its confirm. */
  private async send(output: string, spec: EmitSpec, handedOver: (id: string) => void): Promise<string> {
    // The loss first: a handler aborted by it learns why its emit is refused.
    if (this.lost?.aborted === true) throw this.lost.reason as Error;
    if (this.closed) {
      throw new StagecoachError('INVALID_REQUEST', `stage "${this.stage}" emitted to "${output}" after its handler returned`);
    }
    if (!this.outputs.includes(output)) throw new UnknownOutputError(this.stage, output, this.outputs);
    const batch = this.batch;
    // A batch is entered at its root: `meta.batch` naming another would start one nobody reported
    // as created, which a tracker could see complete too early. `batch` starts one properly.
    if (spec.meta?.batch !== undefined && spec.meta.batch !== batch) {
      throw new StagecoachError(
        'INVALID_REQUEST',
        `stage "${this.stage}": an emitted job joins its parent's batch (${batch ?? 'none'}); "meta.batch" cannot name another (to start a new batch, give "batch")`,
      );
    }
    if (spec.batch !== undefined && spec.batch !== batch) return this.startBatch(output, spec, checkBatchId(spec.batch, 'batch'));
    const job = createJob(spec, { queue: output, parentId: this.job.id, tenant: this.job.tenant, batch });
    const onSent = (): void => handedOver(job.id);
    // The hot path: no middleware, no `unique`, no chain.
    if (this.enqueue.length === 0 && job.unique === undefined) {
      await this.publish(job, spec.headers, onSent);
      this.onPublished?.(output);
      return job.id;
    }
    const id = await runEnqueueChain(this.enqueue, job, spec.headers, (sent, headers) =>
      sent.unique === undefined ? this.publish(sent, headers, onSent) : this.admitUnique(sent, () => this.publish(sent, headers, onSent)),
    );
    // A duplicate ignored (`on_conflict: "ignore"`) was not published: `id` is the first job's.
    if (id === job.id) this.onPublished?.(output);
    return id;
  }

  /** An emitted job carrying `unique`: its key claimed before it is published (docs/unique-jobs.md). */
  private async admitUnique(job: Job, publish: () => Promise<void>): Promise<string | undefined> {
    if (this.unique === undefined) {
      throw new StagecoachError(
        'INVALID_REQUEST',
        `stage "${this.stage}" emitted a job carrying "unique", and has no job store to claim it in`,
      );
    }
    return this.unique.gate.admit(job, this.unique.host, publish);
  }

  /** The end of an emit: the job published, listed among a batched or tracked job's children first. */
  private publish(job: Job, headers: Record<string, HeaderValue> | undefined, onSent: () => void): Promise<void> {
    const wire = { traceparent: traceparentForEmit(this.headers[OJS_HEADERS.traceparent]), headers };
    // Neither batched nor tracked, the hot path: no async frame of its own.
    if (this.children === undefined) return this.sink.send(job, wire, this.scope, this.lost, onSent);
    return this.publishListed(job, wire, onSent);
  }

  private async publishListed(job: Job, wire: Parameters<JobSink['send']>[1], onSent: () => void): Promise<void> {
    // Listed before it is sent: the settlement report names every child that may exist.
    this.children?.push(job.id);
    this.childQueues?.push(job.queue);
    try {
      await this.sink.send(job, wire, this.scope, this.lost, onSent);
    } catch (err) {
      this.unsent?.push(job.id);
      throw err;
    }
  }

  /**
   * An emit that starts a new batch (EmitSpec.batch), as `Publisher` starts one: its root is
   * reported as created (confirmed) before it is sent, so no tracker sees the batch complete
   * before it ran; when the send then fails, a `discarded` report follows, best effort. The root
   * is not listed among this job's children: it belongs to the new batch, not to this job's.
   */
  private async startBatch(output: string, spec: EmitSpec, batch: string): Promise<string> {
    if (this.track === undefined) {
      throw new StagecoachError('INVALID_REQUEST', `stage "${this.stage}": cannot start batch "${batch}" here (no tracking stream)`);
    }
    const tenant = this.job.tenant;
    const job = createJob(spec, { queue: output, parentId: this.job.id, tenant, batch });
    const id = await runEnqueueChain(this.enqueue, job, spec.headers, (sent, headers) =>
      sent.unique === undefined ? this.sendRoot(sent, headers, batch) : this.admitUnique(sent, () => this.sendRoot(sent, headers, batch)),
    );
    if (id === job.id) this.onPublished?.(output);
    return id;
  }

  /** The root of a batch this job starts, reported as created, then sent (see startBatch). */
  private async sendRoot(job: Job, headers: Record<string, HeaderValue> | undefined, batch: string): Promise<void> {
    const track = this.track as (record: TrackingRecord) => Promise<void>;
    const tenant = this.job.tenant;
    const where = {
      job: job.id,
      batch,
      queue: job.queue,
      type: job.type,
      ...(tenant === undefined ? {} : { tenant }),
      ...(job.tags === undefined ? {} : { tags: job.tags }),
    };
    await track(stamp<CreatedReport>({ kind: 'created', ...where }));
    try {
      await this.sink.send(job, { traceparent: traceparentForEmit(this.headers[OJS_HEADERS.traceparent]), headers }, this.scope, this.lost);
    } catch (err) {
      const error = toJobError(err);
      await track(
        stamp<SettledReport>({
          kind: 'settled',
          ...where,
          stage: this.stage,
          outcome: 'discarded',
          attempt: job.attempt,
          error: { type: 'PUBLISH_FAILED', message: `the root of a batch started by stage "${this.stage}" was not sent: ${error.message}` },
        }),
      ).catch(ignore);
      throw err;
    }
  }
}
