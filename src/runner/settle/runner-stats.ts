import type { InstanceMetrics } from '../../observability/stage-metrics.js';

/** What a runner did, counted in plain numbers (tests and the final log line read them). */
export interface StageRunnerStats {
  completed: number;
  emitted: number;
  retried: number;
  deadLettered: number;
  discarded: number;
  /** Deliveries that came back after the process or channel handling them died. */
  poisonRedeliveries: number;
  /** Deliveries handed back unstarted (stop, pause, a suspect about to run alone). */
  givenBack: number;
}

export function emptyStats(): StageRunnerStats {
  return { completed: 0, emitted: 0, retried: 0, deadLettered: 0, discarded: 0, poisonRedeliveries: 0, givenBack: 0 };
}

/** Counts nothing: for runners used without a metrics registry. */
export const NO_METRICS: InstanceMetrics = {
  consumed: () => undefined,
  completed: () => undefined,
  failed: () => undefined,
  retried: () => undefined,
  deadLettered: () => undefined,
  discarded: () => undefined,
  published: () => undefined,
  acked: () => undefined,
};

/**
 * The one place a settled event is counted: each method is one event, recorded in the runner's
 * plain numbers (StageRunnerStats: the stop log line, the pool and tests read them) and in the
 * instance's metrics (the `/metrics` scrape) at once, so that the two never drift apart and no
 * route counts anything itself.
 */
export class RunnerCounts {
  constructor(
    readonly stats: StageRunnerStats,
    private readonly metrics: InstanceMetrics,
  ) {}

  acked(): void {
    this.metrics.acked();
  }

  completed(seconds: number, emitted: number): void {
    this.stats.emitted += emitted;
    this.stats.completed++;
    this.metrics.completed(seconds);
  }

  /** A handler (or an emit) failed, whatever route follows. */
  failed(seconds: number, errorType: string): void {
    this.metrics.failed(seconds, errorType);
  }

  retried(): void {
    this.stats.retried++;
    this.metrics.retried();
  }

  deadLettered(): void {
    this.stats.deadLettered++;
    this.metrics.deadLettered();
  }

  discarded(): void {
    this.stats.discarded++;
    this.metrics.discarded();
  }

  /** A delivery came back after the process or channel handling it died. */
  redelivered(): void {
    this.stats.poisonRedeliveries++;
  }

  handedBack(): void {
    this.stats.givenBack++;
  }
}
