import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Bucket } from '../flow/bucket.js';
import type { BucketSample } from '../flow/token-source.js';
import type { FlowCounters } from '../flow/flow-watch.js';

/**
 * Flow-limit metrics of a process (OJS rate-limiting extension 11.2; docs/flow-control.md), one
 * set per registry whatever the number of groups sharing it. `key` is the partition
 * (`queue:<physical queue>`, `<limit>` or `<limit>@<tenant>`), `strategy` one of concurrency,
 * rate, throttle.
 *
 * | metric | type | labels | meaning |
 * |---|---|---|---|
 * | `stagecoach_limit_waiting` | gauge | key, strategy | jobs of this process waiting for a token now |
 * | `stagecoach_limit_held` | gauge | key, strategy | tokens this process holds now (concurrency: its jobs running under the limit) |
 * | `stagecoach_limit_exceeded_total` | counter | key, strategy | jobs that waited over 50 ms for a token: the limit was met |
 * | `stagecoach_limit_wait_seconds` | histogram | strategy | how long jobs waited for a token |
 */
export class FlowMetrics implements FlowCounters {
  private static readonly byRegistry = new WeakMap<Registry, FlowMetrics>();
  private readonly sources = new Set<() => BucketSample[]>();
  private readonly exceededTotal: Counter<'key' | 'strategy'>;
  private readonly waitSeconds: Histogram<'strategy'>;

  static of(registry: Registry): FlowMetrics {
    let metrics = FlowMetrics.byRegistry.get(registry);
    if (metrics === undefined) FlowMetrics.byRegistry.set(registry, (metrics = new FlowMetrics(registry)));
    return metrics;
  }

  private constructor(registry: Registry) {
    const registers = [registry];
    const gauge = (name: string, help: string, value: (sample: BucketSample) => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['key', 'strategy'],
        registers,
        collect: () => {
          const metric = registry.getSingleMetric(name) as Gauge<'key' | 'strategy'>;
          metric.reset();
          for (const source of this.sources)
            for (const sample of source()) metric.set({ key: sample.bucket.partition, strategy: sample.bucket.strategy }, value(sample));
        },
      });
    };
    gauge('stagecoach_limit_waiting', 'Jobs of this process waiting for a flow-limit token', (s) => s.waiting);
    gauge('stagecoach_limit_held', 'Flow-limit tokens this process holds', (s) => s.held);
    this.exceededTotal = new Counter({
      name: 'stagecoach_limit_exceeded_total',
      help: 'Jobs that waited over 50 ms for a flow-limit token',
      labelNames: ['key', 'strategy'],
      registers,
    });
    this.waitSeconds = new Histogram({
      name: 'stagecoach_limit_wait_seconds',
      help: 'How long jobs waited for a flow-limit token',
      labelNames: ['strategy'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60],
      registers,
    });
  }

  /** A process's buckets, sampled at every scrape; the returned function removes the source. */
  addSource(source: () => BucketSample[]): () => void {
    this.sources.add(source);
    return () => this.sources.delete(source);
  }

  waited(bucket: Bucket, seconds: number): void {
    this.waitSeconds.observe({ strategy: bucket.strategy }, seconds);
  }

  exceeded(bucket: Bucket): void {
    this.exceededTotal.inc({ key: bucket.partition, strategy: bucket.strategy });
  }
}
