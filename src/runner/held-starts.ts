import type { Job } from '../job/job.types.js';

/** How long a tracked job's `started` is held back for its settlement to carry it: 100-200 ms. */
export const START_HOLD_MS = 100;

/** A start held back: the job and when its handler began. */
export interface HeldStart {
  job: Job;
  at: string;
}

/**
 * The `started` reports of tracked jobs, held back briefly (docs/job-state.md "What lags"). Most
 * jobs settle within the hold: their settlement's report then carries the start (`started_at`)
 * and the job costs one report, not two (stream bytes, the broker's append, the tracker's parse
 * and fold: bench `--only jobstate`). A job still running when its start comes of age is
 * reported `started` then, by `flush`, so the store shows it `active` 100-200 ms late.
 *
 * Two generations: a start joins `young`; every START_HOLD_MS the timer flushes `old` and ages
 * `young` into it. The timer runs only while something is held.
 */
export class HeldStarts {
  private young = new Map<string, HeldStart>();
  private old = new Map<string, HeldStart>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly flush: (starts: HeldStart[]) => void) {}

  hold(job: Job): void {
    this.young.set(keyOf(job), { job, at: new Date().toISOString() });
    this.timer ??= this.arm();
  }

  /** The held start of this job's attempt, taken back: its settlement reports it. */
  take(job: Job): string | undefined {
    const key = keyOf(job);
    const held = this.young.get(key) ?? this.old.get(key);
    if (held === undefined) return undefined;
    this.young.delete(key);
    this.old.delete(key);
    return held.at;
  }

  /** Unreferenced: a process may end with starts held; a `started` is best effort (docs/job-state.md). */
  private arm(): NodeJS.Timeout {
    return setTimeout(() => this.age(), START_HOLD_MS).unref();
  }

  private age(): void {
    this.timer = undefined;
    const due = [...this.old.values()];
    this.old = this.young;
    this.young = new Map();
    if (this.old.size > 0) this.timer = this.arm();
    if (due.length > 0) this.flush(due);
  }
}

function keyOf(job: Job): string {
  return `${job.id}\u0000${job.attempt}`;
}
