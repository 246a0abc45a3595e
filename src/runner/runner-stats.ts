import type { InstanceMetrics } from '../observability/stage-metrics.js';

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
