import type { TrackingRecord } from '../../tracking-stream/tracking-report.js';
import { scheduleHopMs, type JobSink } from '../../broker/job-router.js';
import type { ResolvedQueueConfig } from '../../config/config.types.js';
import { InvalidPayloadError, JobCancelledError, RateLimitedError, StagecoachError } from '../../errors/errors.js';
import { fromWire, OJS_HEADERS, type DecodedJob } from '../../job/amqp-mapping.js';
import type { PayloadOffloader } from '../../payload/payload-offloader.js';
import type { Job } from '../../job/job.types.js';
import type { Logger } from '../../logging/logger.js';
import type { PublisherCheck } from '../../security/publisher-check.js';
import { inJobSpan, sdkRegistered } from '../../observability/tracing.js';
import { invokeHandler } from '../../stage/handler-invoker.js';
import { hasExpired, JobExpiredError } from '../../retry/handler-outcomes.js';
import { JobContext, type UniqueEnqueue } from '../../stage/job-context.js';
import type { EnqueueMiddleware } from '../../stage/middleware/middleware.types.js';
import type { StageHandler, StageMetadata } from '../../stage/stage.types.js';
import type { Delivery, SettlementInput } from '../channels/delivery.js';
import type { DirectiveGate } from './directive-gate.js';
import { ConsumerTimeoutError } from '../channels/consumer-timeout.js';
import { ProgressReporter, type ProgressOutlets } from './progress-reporter.js';

export interface DeliveryProcessorOptions {
  stage: StageMetadata;
  /** The stage's input queue, resolved. */
  input: ResolvedQueueConfig;
  /** The tenant of the instance; undefined on a shared queue. */
  tenant: string | undefined;
  tenantHeader: string;
  handler: StageHandler;
  /** Where `ctx.emit()` publishes. */
  sink: JobSink;
  log: Logger;
  /** Called when an emitted job is confirmed (metrics). */
  onPublished?: (output: string) => void;
  /** True when this process itself lost the delivery with a channel (see LossLedger): not a crash. */
  forgive?: (messageId: unknown) => boolean;
  /** Whether the process that lost this redelivery lives and excused it (LossLedger.awaitExcuse). */
  excused?: (messageId: unknown) => Promise<boolean>;
  /** The broker's consumer_timeout (ms, 0: not known) when this process saw it time out this job's last attempt (see LossLedger). */
  timedOut?: (messageId: unknown) => number | undefined;
  /** With `security.tenantUsers`: who may publish jobs for the job's tenant. */
  publisherCheck?: PublisherCheck;
  /** Batch and tenant directives (cancel, pause): consulted after admission, before the handler. */
  directives?: DirectiveGate;
  /** Appends a record to the tracking stream, confirmed: a handler starting a batch reports its root. */
  track?: (record: TrackingRecord) => Promise<void>;
  /** The input queue's `tracking` is on (docs/job-state.md): the context lists children, and starts are reported. */
  tracked?: boolean;
  /** A job's handler is about to run (its `started` report, for a tracked job). */
  onStarted?: (job: Job) => void;
  /** Loads arguments that travelled by reference (`x-ojs-payload-ref`) before the handler runs. */
  payloads?: PayloadOffloader;
  /** Enqueue middleware of every `ctx.emit()`: the process's, then the stage's. @defaultValue [] */
  enqueue?: readonly EnqueueMiddleware[];
  /** Where emitted jobs carrying `unique` claim their keys (docs/unique-jobs.md). */
  unique?: UniqueEnqueue;
  /** Where a job's `ctx.progress()` goes; without it, nowhere. */
  progress?: (job: Job) => ProgressOutlets;
}

/**
 * Takes one delivery from the wire to an {@link SettlementInput}: decodes it, admits it (its validated
 * publisher may act for its tenant, its tenant is the queue's, its type is the stage's, it is
 * not a crash redelivery), asks its batch's and tenant's directives (cancelled, paused), runs the handler under
 * its timeout and trace span. It never settles anything and never rejects: what happens to the
 * delivery on the broker is the settlement's alone.
 */
export class DeliveryProcessor {
  constructor(private readonly options: DeliveryProcessorOptions) {}

  async run(delivery: Delivery): Promise<SettlementInput> {
    let admitted = this.admit(delivery);
    // Its process may live and say so (a broker restart, closed connections): then not a crash's.
    if ('kind' in admitted && admitted.kind === 'suspect' && (await this.options.excused?.(delivery.message.properties.messageId)))
      admitted = this.admit(delivery);
    if ('kind' in admitted) return admitted;
    const { job, headers } = admitted;
    const { stage, log, sink, onPublished, handler, directives } = this.options;
    // Past its deadline (OJS core `expires_at`): discarded unrun, wherever it waited.
    if (job.expires_at !== undefined && hasExpired(job)) return { kind: 'failed', job, error: new JobExpiredError(job.expires_at) };
    // Scheduled beyond the ladder's reach: not run yet, whatever its directives say.
    if (delivery.input === 'due') {
      const waitMs = scheduleHopMs(job, Date.now());
      if (waitMs !== undefined) return { kind: 'not-due', job, waitMs };
    }
    if (directives !== undefined) {
      const asked = directives.verdict(job);
      const verdict = typeof asked === 'string' ? asked : await asked;
      if (verdict === 'cancel' || verdict === 'cancel-job') return { kind: 'cancelled', job, by: verdict === 'cancel' ? 'batch' : 'job' };
      // Resumed since the verdict was remembered: it runs.
      if (verdict !== 'run' && (await directives.stillParked(job, verdict))) {
        return { kind: 'parked', job, by: verdict === 'park-tenant' ? 'tenant' : 'batch' };
      }
    }
    // The handler sees the arguments; the settlement keeps the job as it travels (by reference):
    // a retry, a suspect or a dead letter carries the reference, not the arguments.
    let handled = job;
    if (headers[OJS_HEADERS.payloadRef] !== undefined) {
      try {
        if (this.options.payloads === undefined)
          throw new StagecoachError('INVALID_REQUEST', 'a job sent by reference, and no payload store');
        const args = await this.options.payloads.load(headers, this.options.tenant ?? job.tenant, delivery.queue);
        if (args !== undefined) handled = { ...job, args };
      } catch (error) {
        return { kind: 'failed', job, error };
      }
    }
    // A workflow step's parent_results by reference (docs/workflows.md), loaded as arguments are.
    const results = job.meta.parent_results_ref;
    if (results !== undefined && this.options.payloads !== undefined) {
      try {
        handled = {
          ...handled,
          parent_results: await this.options.payloads.loadParentResults(results, this.options.tenant ?? job.tenant, delivery.queue),
        };
      } catch (error) {
        return { kind: 'failed', job, error };
      }
    }
    // Made at the first `ctx.progress()`: most handlers never report, and pay one closure.
    let progress: ProgressReporter | undefined;
    let runOver = false;
    const outletsOf = this.options.progress;
    const reportProgress =
      outletsOf === undefined
        ? undefined
        : (fraction: number, message?: string): void => {
            if (runOver) return;
            progress ??= new ProgressReporter(job, { stage: stage.name, queue: stage.input }, outletsOf(job));
            progress.report(fraction, message);
          };
    const endProgress = (completed: boolean): void => {
      runOver = true;
      progress?.end(completed);
    };
    const ctx = new JobContext(
      stage.name,
      stage.outputs,
      handled,
      headers,
      sink,
      log,
      delivery.source.lost,
      onPublished,
      this.options.track,
      this.options.enqueue,
      this.options.tracked,
      this.options.unique,
      reportProgress,
    );
    // Its rate and throttle tokens are spent now, as late as can be: a window counts handler
    // starts, not deliveries refused, cancelled or parked before (docs/flow-control.md).
    delivery.permit?.start();
    delivery.source.started(delivery.message);
    // A remote stage's job starts when a worker claims it (StageMetadata.remote).
    if (stage.remote !== true) this.options.onStarted?.(job);
    const began = performance.now();
    try {
      const timeout = stage.remote === true ? undefined : (job.timeout ?? this.options.input.default_timeout);
      if (sdkRegistered())
        await inJobSpan(stage.name, delivery.queue, handled, headers, () => invokeHandler(handler, handled, ctx, timeout));
      else await invokeHandler(handler, handled, ctx, timeout);
      endProgress(true);
      return { kind: 'completed', job, ctx, seconds: (performance.now() - began) / 1000 };
    } catch (error) {
      endProgress(false);
      if (error instanceof RateLimitedError) return { kind: 'rate-limited', job, error, ctx };
      if (error instanceof JobCancelledError) {
        ctx.close();
        return { kind: 'cancelled', job, by: 'job' };
      }
      return { kind: 'failed', job, error, ctx, seconds: (performance.now() - began) / 1000 };
    }
  }

  /** The decoded job when it may run (fromWire's own object: no wrapper per job), else its outcome. */
  private admit(delivery: Delivery): SettlementInput | DecodedJob {
    const { stage, tenant, tenantHeader, publisherCheck } = this.options;
    let job: Job | undefined;
    try {
      const decoded = fromWire(delivery.message, tenantHeader);
      job = decoded.job;
      if (publisherCheck !== undefined) {
        const refusal = publisherCheck.refusal(job.tenant, delivery.message.properties.userId);
        // Not a job of ours: what it claims (its tenant, its retry policy, a dead_letter_queue to
        // follow into the claimed tenant's queues) is not trusted. It goes to this queue's own
        // dead letters as it came, byte for byte, never retried, never run.
        // Its claim rides along (`refused`) only for its batch's report, made with this queue's tenant.
        if (refusal !== undefined) return { kind: 'failed', job: undefined, error: refusal, refused: job };
      }
      if (tenant !== undefined && job.tenant !== tenant) {
        // The broker routed it here by its routing header; a body naming another tenant must
        // not carry that tenant's identity into this tenant's outputs.
        throw new InvalidPayloadError(
          `job names tenant "${job.tenant ?? '(none)'}" but arrived on ${delivery.queue}, the queue of "${tenant}"`,
          stage.input,
        );
      }
      if (stage.types && !stage.types.includes(job.type)) {
        throw new InvalidPayloadError(
          `stage "${stage.name}" does not handle job type "${job.type}" (handles ${stage.types.join(', ')})`,
          stage.input,
        );
      }
      // A job the broker timed out, here or in another process (a `timed-out` control message):
      // redelivered, or already moved to the suspect queue before the other process's word came.
      const timedOutMs =
        isRedelivery(delivery) || delivery.input === 'suspect' ? this.options.timedOut?.(delivery.message.properties.messageId) : undefined;
      // Run again, it would meet the broker's timeout again, and again.
      if (timedOutMs !== undefined) throw new ConsumerTimeoutError(job.attempt, timedOutMs);
      if (isRedelivery(delivery) && !this.options.forgive?.(delivery.message.properties.messageId)) {
        // Stagecoach never requeues a delivery itself (see Settler): a redelivered one was in
        // the hands of a process that died or lost its channel (this process, when healthy,
        // knows its own losses and forgives them). From `main` or `due` it may
        // have been only prefetched, so it is not judged but moved to the suspect queue; from
        // the suspect queue, where a job runs alone, the crash was its own.
        if (delivery.input !== 'suspect') return { kind: 'suspect', job };
        throw new StagecoachError('POISON', `attempt ${job.attempt} killed the process handling it`);
      }
      return decoded;
    } catch (error) {
      return { kind: 'failed', job, error };
    }
  }
}

/** Classic queues set `redelivered`; quorum queues also count in `x-delivery-count`. */
export function isRedelivery(delivery: Pick<Delivery, 'message'>): boolean {
  const { message } = delivery;
  const count = Number(message.properties.headers?.['x-delivery-count'] ?? 0);
  return message.fields.redelivered || count > 0;
}
