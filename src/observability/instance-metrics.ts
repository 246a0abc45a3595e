import type { Counter, Histogram } from 'prom-client';
import { DeferredInc, DeferredObserve, type Deferred, type Inc, type Observe } from './deferred-counts.js';
import type { InstanceMetrics } from './metric-types.js';

/** The labels every job metric of a stage instance carries. */
export type StageLabelName = 'stage' | 'queue' | 'tenant';
export type StageLabelValues = Record<StageLabelName, string>;

export const STAGE_LABELS: readonly StageLabelName[] = ['stage', 'queue', 'tenant'];

/** 1 ms .. 5 min, roughly 1-2.5-5 per decade. */
export const DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

/** The metric families a {@link BoundInstance} binds children of. */
export interface Families {
  consumed: Counter<StageLabelName>;
  completed: Counter<StageLabelName>;
  failed: Counter<StageLabelName | 'error_type'>;
  retried: Counter<StageLabelName>;
  deadLettered: Counter<StageLabelName>;
  discarded: Counter<StageLabelName>;
  published: Counter<StageLabelName | 'output'>;
  acks: Counter<StageLabelName>;
  duration: Histogram<StageLabelName | 'outcome'>;
}

/** Label children bound once per stage instance. */
export class BoundInstance implements InstanceMetrics {
  private readonly consumedChild: Inc;
  private readonly completedChild: Inc;
  private readonly retriedChild: Inc;
  private readonly deadLetteredChild: Inc;
  private readonly discardedChild: Inc;
  private readonly ackChild: Inc;
  private readonly completedDuration: Observe;
  private readonly failedDuration: Observe;
  /** By `error_type` label value: bounded by the cap of {@link StageMetrics}. */
  private readonly failedByType = new Map<string, Inc>();
  private readonly publishedByOutput = new Map<string, Inc>();

  constructor(
    private readonly families: Families,
    private readonly errorTypeLabel: (errorType: string | undefined) => string,
    private readonly labels: StageLabelValues,
    private readonly track: (deferred: Deferred) => void,
  ) {
    const start = (c: Counter<StageLabelName>): Inc => {
      c.inc(labels, 0);
      return this.defer(c.labels(labels));
    };
    this.consumedChild = start(families.consumed);
    this.completedChild = start(families.completed);
    this.retriedChild = start(families.retried);
    this.deadLetteredChild = start(families.deadLettered);
    this.discardedChild = start(families.discarded);
    this.ackChild = start(families.acks);
    const completed = { ...labels, outcome: 'completed' };
    const failed = { ...labels, outcome: 'failed' };
    families.duration.zero(completed);
    families.duration.zero(failed);
    const observe = (child: Observe): Observe => {
      const deferred = new DeferredObserve(child);
      track(deferred);
      return deferred;
    };
    this.completedDuration = observe(families.duration.labels(completed));
    this.failedDuration = observe(families.duration.labels(failed));
  }

  private defer(child: Inc): Inc {
    const deferred = new DeferredInc(child);
    this.track(deferred);
    return deferred;
  }

  consumed(): void {
    this.consumedChild.inc();
  }

  completed(seconds: number): void {
    this.completedChild.inc();
    // prom-client throws on NaN; a metric must never fail the job it measures.
    if (seconds >= 0 && seconds < Infinity) this.completedDuration.observe(seconds);
  }

  failed(seconds: number, errorType: string): void {
    const type = this.errorTypeLabel(errorType);
    let child = this.failedByType.get(type);
    if (child === undefined) {
      child = this.defer(this.families.failed.labels({ ...this.labels, error_type: type }));
      this.failedByType.set(type, child);
    }
    child.inc();
    if (seconds >= 0 && seconds < Infinity) this.failedDuration.observe(seconds);
  }

  retried(): void {
    this.retriedChild.inc();
  }

  deadLettered(): void {
    this.deadLetteredChild.inc();
  }

  discarded(): void {
    this.discardedChild.inc();
  }

  published(output: string): void {
    this.publishedChild(output).inc();
  }

  acked(): void {
    this.ackChild.inc();
  }

  /** The `published` child of `output`, made (and started at 0) on first use. */
  publishedChild(output: string): Inc {
    let child = this.publishedByOutput.get(output);
    if (child === undefined) {
      const labels = { ...this.labels, output };
      this.families.published.inc(labels, 0);
      child = this.defer(this.families.published.labels(labels));
      this.publishedByOutput.set(output, child);
    }
    return child;
  }
}
