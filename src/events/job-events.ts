import type { CompiledConfig } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import type { Job, JobError } from '../job/job.types.js';
import type { EventType } from './ojs-event.js';

/** Publishes one event, never rejecting and never awaited by the caller (EventPublisher.publish). */
export type EventSink = (type: EventType, subject: string | undefined, data: Record<string, unknown>) => unknown;

/**
 * The OJS job events (openjobspec/spec `spec/ojs-events.md` 4.1) of one stage instance's input
 * queue, for the queues with `queues.<q>.events: true`: `job.completed`, `job.failed` (every
 * failed attempt, retried or not), `job.discarded` (dead-lettered or discarded: the job will not
 * run again), `job.cancelled` (discarded unrun: its batch was cancelled). The subject is the job's id; the data
 * has the spec's fields, plus `tenant` and `stage`.
 *
 * Called by the after-settle hook once the delivery is settled, never before: an event is
 * information about a settlement, not part of it, so publishing never delays the ack, and a
 * process that dies between the ack and the publish loses the event (at most once).
 */
export class JobEvents {
  private constructor(
    private readonly publish: EventSink,
    private readonly queue: string,
    private readonly stage: string,
  ) {}

  /** The events of a stage's input queue for `tenant`; undefined without a sink, or when that queue's `events` is off. */
  static of(
    config: CompiledConfig,
    where: { queue: string; tenant: string | undefined; stage: string },
    publish: EventSink | undefined,
  ): JobEvents | undefined {
    if (publish === undefined || !settingsFor(config, where.queue, where.tenant).events) return undefined;
    return new JobEvents(publish, where.queue, where.stage);
  }

  completed(job: Job, seconds: number): void {
    this.send('job.completed', job, { duration_ms: Math.round(seconds * 1000), attempt: job.attempt });
  }

  /** An attempt failed; `retryable`: it will run again. */
  failed(job: Job, error: JobError, retryable: boolean): void {
    this.send('job.failed', job, {
      attempt: job.attempt,
      error: {
        code: error.type,
        message: error.message,
        retryable,
        ...(error.backtrace === undefined || error.backtrace.length === 0 ? {} : { stack_trace: error.backtrace.join('\n') }),
      },
    });
  }

  /** It will not run again: dead-lettered, or discarded. */
  discarded(job: Job, error: JobError, route: 'dead_letter' | 'discard'): void {
    this.send('job.discarded', job, { total_attempts: job.attempt, last_error: { code: error.type, message: error.message }, route });
  }

  /** Discarded unrun because it was cancelled (today: with its batch). */
  cancelled(job: Job): void {
    const batch = job.meta.batch;
    this.send(
      'job.cancelled',
      job,
      typeof batch === 'string' ? { cancelled_by: 'batch', reason: `batch "${batch}" was cancelled`, batch } : {},
    );
  }

  /** A running job's progress (`ctx.progress`), as the HTTP binding publishes an HTTP worker's. */
  progress(job: Job, progress: number | null, message: string | undefined): void {
    this.send('progress.updated', job, { progress, ...(message === undefined ? {} : { message }) });
  }

  private send(type: EventType, job: Job, data: Record<string, unknown>): void {
    this.publish(type, job.id, {
      job_type: job.type,
      queue: this.queue,
      ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
      stage: this.stage,
      ...data,
    });
  }
}
