import type { Job } from '../../job/job.types.js';
import { stamp, type ProgressRecord } from '../../tracking-stream/tracking-report.js';

/** At most one progress report per job in this many milliseconds (spec/ojs-progress.md 6.2). */
export const PROGRESS_INTERVAL_MS = 1000;

/** Where a job's progress goes: the tracking stream (a tracked job), the `progress.updated` event (a queue with `events`). */
export interface ProgressOutlets {
  /** Appends the record to the tracking stream; undefined when the job is not tracked. */
  record?: (record: ProgressRecord) => Promise<void>;
  /** Publishes `progress.updated`; undefined when its queue's `events` is off. */
  event?: (job: Job, record: ProgressRecord) => void;
}

function ignore(): void {}

/**
 * The progress one run of a handler reports (`ctx.progress(fraction, message?)`): clamped to
 * 0.0..1.0, never lower than before in this run, the message kept until another is given. A
 * handler calling it in a tight loop costs the broker at most one report a second: the first goes
 * out at once, later ones within the second are folded into one sent when it is over (the latest
 * value, never an intermediate one). At the end of the run, a report still waiting is dropped
 * when the job completed (completion shows it at 1.0) and sent otherwise (a failed job keeps how
 * far it got).
 */
export class ProgressReporter {
  private value: number | null = null;
  private message: string | undefined;
  private waiting = false;
  private sentAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly job: Job,
    private readonly where: { stage: string; queue: string },
    private readonly outlets: ProgressOutlets,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {}

  report(fraction: number, message?: string): void {
    // Nothing to report to (the job neither tracked nor its queue's events on), or the run is over.
    if (this.ended || (this.outlets.record === undefined && this.outlets.event === undefined)) return;
    // Fire and forget (ojs-progress 5.1): a value that is no number is no progress, not an error.
    if (typeof fraction === 'number' && !Number.isNaN(fraction)) {
      this.value = Math.max(Math.min(1, Math.max(0, fraction)), this.value ?? 0);
    }
    if (typeof message === 'string') this.message = message;
    this.waiting = true;
    const wait = this.sentAt + this.intervalMs - Date.now();
    if (wait <= 0) this.flush();
    else if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), wait);
      this.timer.unref();
    }
  }

  /** The run is over: a waiting report is sent unless the job `completed`. */
  end(completed: boolean): void {
    if (this.ended) return;
    if (!completed) this.flush();
    this.ended = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.waiting) return;
    this.waiting = false;
    this.sentAt = Date.now();
    const { job } = this;
    const record = stamp<ProgressRecord>({
      kind: 'progress',
      job: job.id,
      ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
      stage: this.where.stage,
      queue: this.where.queue,
      attempt: job.attempt,
      progress: this.value,
      ...(this.message === undefined ? {} : { message: this.message }),
    });
    // Information about a running job: never awaited, a lost report only shows older progress.
    this.outlets.record?.(record).catch(ignore);
    this.outlets.event?.(job, record);
  }
}
