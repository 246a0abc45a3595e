/**
 * The hot-path counters of the stage metrics: plain numbers, handed to prom-client only when it
 * collects (a scrape), since prom-client hashes the label set on every `inc()` of a child.
 */

export interface Inc {
  inc(value?: number): void;
}
export interface Observe {
  observe(value: number): void;
}

/**
 * Counts on the hot path in a plain number and hands the total to prom-client at scrape time:
 * prom-client hashes the label set on every `inc()` of a child, which costs microseconds a job.
 */
export class DeferredInc implements Inc {
  private pending = 0;
  constructor(private readonly child: Inc) {}
  inc(value = 1): void {
    this.pending += value;
  }
  flush(): void {
    if (this.pending === 0) return;
    this.child.inc(this.pending);
    this.pending = 0;
  }
}

/** Observations kept until the scrape (or until a few thousand wait), for the same reason. */
export class DeferredObserve implements Observe {
  private readonly pending: number[] = [];
  constructor(private readonly child: Observe) {}
  observe(value: number): void {
    this.pending.push(value);
    if (this.pending.length >= 4096) this.flush();
  }
  flush(): void {
    for (const value of this.pending) this.child.observe(value);
    this.pending.length = 0;
  }
}

export type Deferred = DeferredInc | DeferredObserve;
