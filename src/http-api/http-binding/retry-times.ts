/** Most retries remembered: a few dozen bytes each. */
export const RETRY_TIMES_SIZE = 20_000;

/** When a retried job comes back: its next attempt, after `delayMs` from `at` (ms since the epoch). */
export interface RetryTime {
  nextAttempt: number;
  delayMs: number;
  at: number;
}

/**
 * The retries the remote stages' runners put on the delay ladder (StageRunnerOptions.onRetryScheduled),
 * newest RETRY_TIMES_SIZE kept: the job store keeps a job's state, not when its retry is due, so
 * the nack answer's `next_attempt_at` and `retry_delay_ms` and the fetched retry's `retry_delay_ms`
 * (spec/ojs-http-binding.md, NACK; the suite's L0-OPS-013, L1-RTR-*) come from here. The delay is
 * the one the settlement chose (jitter included), not one worked out again.
 */
export class RetryTimes {
  private readonly times = new Map<string, RetryTime>();

  constructor(private readonly size = RETRY_TIMES_SIZE) {}

  add(id: string, time: RetryTime): void {
    this.times.delete(id);
    this.times.set(id, time);
    if (this.times.size > this.size) {
      const oldest = this.times.keys().next();
      if (oldest.done !== true) this.times.delete(oldest.value);
    }
  }

  /** The retry that brings job `id` to attempt `attempt`, when this server scheduled it. */
  of(id: string, attempt: number): RetryTime | undefined {
    const time = this.times.get(id);
    return time?.nextAttempt === attempt ? time : undefined;
  }

  /** The OJS fields of that retry: `retry_delay_ms` and `next_attempt_at`, or none. */
  fields(id: string, attempt: number): { retry_delay_ms?: number; next_attempt_at?: string } {
    const time = this.of(id, attempt);
    if (time === undefined) return {};
    return { retry_delay_ms: Math.round(time.delayMs), next_attempt_at: new Date(time.at + time.delayMs).toISOString() };
  }

  clear(): void {
    this.times.clear();
  }
}
