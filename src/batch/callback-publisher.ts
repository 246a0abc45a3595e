import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { JobRouter } from '../broker/job-router.js';
import type { CompiledConfig } from '../config/config.types.js';
import { PublishError, StagecoachError } from '../errors/errors.js';
import { createJob } from '../job/envelope.js';
import type { CallbackName, CallbackSpec } from '../job/job.types.js';
import { childTraceparent } from '../job/trace-context.js';
import type { Logger } from '../logging/logger.js';
import { callbackJobId, callbackMeta, callbacksToRun, type BatchEnd } from './batch-callbacks.js';
import type { BatchCounts, TrackedBatch } from './batch-fold.js';

/** Waits between attempts at a callback the broker did not take: 1 s, doubling, at most 30 s. */
const FIRST_WAIT_MS = 1_000;
const LONGEST_WAIT_MS = 30_000;

/** The tracker closed while a callback was still being tried: the announcement must not be recorded. */
export class CallbacksInterrupted extends StagecoachError {
  constructor(batch: string) {
    super('PUBLISH_FAILED', `the callbacks of batch "${batch}" were interrupted: the tracker is closing`);
  }
}

/**
 * Publishes the callback jobs of a batch the tracker announces (docs/batches.md, Callbacks),
 * through the same routing as every producer (`JobRouter`: tenant header, variants, unroutable),
 * with confirms, on a channel of its own.
 *
 * Each callback job has the batch's tenant, no batch (it would keep its batch open), the
 * declared type, args, meta and headers, `meta.batch_callback` (see callbackMeta), and the id
 * `callbackJobId(batch, name)`: the same each time the batch is announced again after a crash,
 * so a consumer drops the repeat by id.
 *
 * A callback the broker does not take (a full queue, a lost channel) is tried again, waiting
 * 1 s, then twice as long each time up to 30 s, until it is confirmed or the tracker closes (then
 * {@link CallbacksInterrupted}: the batch is not recorded as announced, and the next tracker
 * announces it again). A callback that can never be published (its queue no longer configured
 * under `strict_queues`, a type the queue no longer allows) is logged as an error and skipped.
 */
export class CallbackPublisher {
  private channel: ConfirmPublisher | undefined;
  private router: JobRouter | undefined;
  private closed = false;
  private readonly wakeups = new Set<() => void>();

  constructor(
    private readonly config: CompiledConfig,
    private readonly connection: AmqpConnection,
    private readonly log: Logger,
  ) {}

  /**
   * Publishes the callbacks `end` calls for, in order, each once confirmed.
   * @returns the id of each callback job published, by name.
   * @throws CallbacksInterrupted when the publisher closes before they are all confirmed.
   */
  async run(batch: TrackedBatch, end: BatchEnd, counts: BatchCounts): Promise<Partial<Record<CallbackName, string>>> {
    const published: Partial<Record<CallbackName, string>> = {};
    for (const { name, spec } of callbacksToRun(batch.callbacks, end)) {
      const id = await this.publish(batch, name, spec, end, counts);
      if (id !== undefined) published[name] = id;
    }
    return published;
  }

  /** Tries nothing again: a callback waiting for its next attempt gives up now (CallbacksInterrupted); one in flight still gets its confirm. */
  stop(): void {
    this.closed = true;
    for (const wake of this.wakeups) wake();
  }

  async close(): Promise<void> {
    this.stop();
    await this.channel?.close();
  }

  /** The callback's job id once confirmed, undefined when it can never be published. */
  private async publish(
    batch: TrackedBatch,
    name: CallbackName,
    spec: CallbackSpec,
    end: BatchEnd,
    counts: BatchCounts,
  ): Promise<string | undefined> {
    const context = { batch: batch.id, tenant: batch.tenant, callback: name, queue: spec.queue, type: spec.type };
    for (let wait = FIRST_WAIT_MS; ; wait = Math.min(wait * 2, LONGEST_WAIT_MS)) {
      if (this.closed) throw new CallbacksInterrupted(batch.id);
      try {
        const job = createJob(
          { type: spec.type, args: spec.args ?? [], meta: { ...spec.meta, batch_callback: callbackMeta(batch, name, end, counts) } },
          { queue: spec.queue, ...(batch.tenant === undefined ? {} : { tenant: batch.tenant }) },
        );
        job.id = callbackJobId(batch.id, name);
        await (
          await this.routerOf()
        ).send(job, {
          traceparent: childTraceparent(),
          ...(spec.headers === undefined ? {} : { headers: spec.headers }),
        });
        this.log.info('batch callback published', { ...context, job_id: job.id });
        return job.id;
      } catch (err) {
        // Only the broker's side may pass: a full queue drains, a lost channel is replaced.
        if (!(err instanceof PublishError) && err instanceof StagecoachError) {
          this.log.error('batch callback cannot be published: skipped', { ...context, code: err.code, err: err.message });
          return undefined;
        }
        this.log.warn('batch callback not published: trying again', { ...context, err: (err as Error).message, wait_ms: wait });
        if (this.channel?.isOpen === false) this.channel = this.router = undefined;
        await this.pause(wait);
      }
    }
  }

  private async routerOf(): Promise<JobRouter> {
    if (this.router === undefined) {
      this.channel = await ConfirmPublisher.open(this.connection);
      this.router = new JobRouter(this.config, this.channel);
    }
    return this.router;
  }

  /** Waits `ms`, or less when the publisher closes. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.wakeups.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.wakeups.add(wake);
    });
  }
}
