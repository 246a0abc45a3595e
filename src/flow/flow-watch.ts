import type { Bucket } from './bucket.js';

/** A job that waited this long for a token met its limit (ms): a shorter wait is the round trip of a free token. */
export const EXCEEDED_AFTER_MS = 50;

/** At most one `rate_limit.exceeded` event per bucket per this many ms, per process. */
export const EXCEEDED_EVENT_INTERVAL_MS = 10_000;

/** Where the watch counts (FlowMetrics, on the process's registry). */
export interface FlowCounters {
  waited(bucket: Bucket, seconds: number): void;
  exceeded(bucket: Bucket): void;
}

/** Where the watch sends `rate_limit.*` events (the process's EventPublisher). */
export type FlowEventSink = (
  type: 'rate_limit.exceeded' | 'rate_limit.released' | 'rate_limit.dynamic_adjusted' | 'rate_limit.dropped',
  key: string,
  data: Record<string, unknown>,
) => void;

/**
 * Watches every token granted in a process (OJS rate-limiting extension 11): counts each wait
 * and each limit met, and turns a bucket's limit being met into one `rate_limit.exceeded` event
 * (then at most one per EXCEEDED_EVENT_INTERVAL_MS while it lasts) and its end, when no job of
 * the process waits for it any more, into one `rate_limit.released`. Per job, the metrics say it.
 */
export class FlowWatch {
  private readonly limited = new Set<string>();
  private readonly lastEvent = new Map<string, number>();

  constructor(
    private readonly counters: FlowCounters | undefined,
    private readonly events: FlowEventSink | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  readonly granted = (bucket: Bucket, waitedMs: number, stillWaiting: number): void => {
    this.counters?.waited(bucket, waitedMs / 1000);
    if (waitedMs >= EXCEEDED_AFTER_MS) {
      this.counters?.exceeded(bucket);
      const last = this.lastEvent.get(bucket.id);
      if (!this.limited.has(bucket.id) || last === undefined || this.now() - last >= EXCEEDED_EVENT_INTERVAL_MS) {
        this.limited.add(bucket.id);
        this.lastEvent.set(bucket.id, this.now());
        this.events?.('rate_limit.exceeded', bucket.partition, {
          key: bucket.partition,
          strategy: bucket.strategy,
          limit: bucket.size,
          current: stillWaiting,
        });
      }
    }
    if (stillWaiting === 0 && this.limited.delete(bucket.id)) {
      this.events?.('rate_limit.released', bucket.partition, { key: bucket.partition, strategy: bucket.strategy });
    }
  };
}
