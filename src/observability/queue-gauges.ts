import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../logging/logger.js';
import { STAGE_LABELS, type StageLabelName } from './instance-metrics.js';
import type { QueueDepthSample, QueueDepthSource } from './metric-types.js';
import { OTHER_TENANTS, type TenantLabels } from './tenant-labels.js';

type QueueLabelName = StageLabelName | 'physical_queue';

export interface QueueGaugesOptions {
  registry: Registry;
  tenants: TenantLabels;
  /** How long a scrape waits for the sources before it reports no queue series. */
  timeoutMs: number;
  log?: Logger | undefined;
}

/**
 * `stagecoach_queue_depth`, `stagecoach_queue_max_size` and `stagecoach_queue_utilization`,
 * filled at every scrape (never in between) from the sources of their owners (see
 * StageMetrics.setQueueDepthSource). A source that throws, rejects, or takes longer than
 * `timeoutMs` leaves the gauges empty for that scrape and is logged; the scrape itself succeeds.
 */
export class QueueGauges {
  /** By owner: the groups of one `dev` process share the registry, each with its queues. */
  private readonly sources = new Map<object, QueueDepthSource>();
  private failing = false;
  /** The samples of the scrape under way: the three gauges collect from one source call. */
  private sampling: Promise<readonly QueueDepthSample[] | undefined> | undefined;

  constructor(private readonly options: QueueGaugesOptions) {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- prom-client binds `this` in collect() to the gauge
    const self = this;
    const registers = [options.registry];
    new Gauge({
      name: 'stagecoach_queue_depth',
      help: 'Messages ready in a queue, as last read from the broker.',
      labelNames: [...STAGE_LABELS, 'physical_queue'],
      registers,
      // Called by prom-client on every scrape of this gauge.
      collect() {
        return self.collect(this, (gauge, s) => gauge.set(labelsOf(s), s.depth));
      },
    });
    new Gauge({
      name: 'stagecoach_queue_max_size',
      help: 'The max_size (messages) in force on a queue, read from the broker at scrape time; absent when unlimited.',
      labelNames: [...STAGE_LABELS, 'physical_queue'],
      registers,
      collect() {
        return self.collect(this, (gauge, s) => {
          if (s.maxSize !== undefined) gauge.set(labelsOf(s), s.maxSize);
        });
      },
    });
    new Gauge({
      name: 'stagecoach_queue_utilization',
      help: 'Queue depth divided by its max_size (1 = full), at scrape time; absent when unlimited.',
      labelNames: [...STAGE_LABELS, 'physical_queue'],
      registers,
      collect() {
        return self.collect(this, (gauge, s) => {
          if (s.maxSize !== undefined && s.maxSize > 0) gauge.set(labelsOf(s), s.depth / s.maxSize);
        });
      },
    });
  }

  /** `owner`'s source, replacing its previous one; `undefined` removes it. */
  setSource(source: QueueDepthSource | undefined, owner: object): void {
    if (source === undefined) this.sources.delete(owner);
    else this.sources.set(owner, source);
  }

  /**
   * Fills one of the gauges from this scrape's samples. prom-client collects the metrics of a
   * scrape concurrently: the first gauge to collect calls the sources, the others share their
   * answer, so depth, max size and utilization always come from the same reading.
   */
  private async collect(
    gauge: Gauge<QueueLabelName>,
    fill: (gauge: Gauge<QueueLabelName>, sample: QueueDepthSample) => void,
  ): Promise<void> {
    if (this.sampling === undefined) {
      const sampling = this.sample();
      this.sampling = sampling;
      // Cleared once answered: the next scrape reads the broker again.
      void sampling.finally(() => {
        if (this.sampling === sampling) this.sampling = undefined;
      });
    }
    const samples = await this.sampling;
    // Stale values would mislead: a scrape without samples reports none.
    gauge.reset();
    for (const s of samples ?? []) {
      if (Number.isFinite(s.depth)) fill(gauge, s);
    }
  }

  /** The sources' samples, or undefined (logged) when one fails or they take too long. */
  private async sample(): Promise<readonly QueueDepthSample[] | undefined> {
    const sources = [...this.sources.values()];
    if (sources.length === 0) return undefined;
    const { log, timeoutMs } = this.options;
    let samples: readonly QueueDepthSample[];
    try {
      const all = Promise.all(sources.map((source) => Promise.resolve().then(source)));
      samples = (await withTimeout(all, timeoutMs)).flat();
    } catch (err) {
      if (!this.failing) {
        this.failing = true;
        log?.warn('queue depth not available for this scrape', { error: err instanceof Error ? err.message : String(err) });
      } else {
        log?.debug('queue depth still not available', { error: err instanceof Error ? err.message : String(err) });
      }
      return undefined;
    }
    samples = this.boundTenants(samples);
    if (this.failing) {
      this.failing = false;
      log?.info('queue depth available again');
    }
    return samples;
  }

  /**
   * The queues of tenants beyond the cap (TenantLabels) as one sample per stage and logical
   * queue, `tenant` and `physical_queue` `_other`: their depths summed, and their max sizes when
   * each has one (so utilization is theirs together).
   */
  private boundTenants(samples: readonly QueueDepthSample[]): readonly QueueDepthSample[] {
    const kept: QueueDepthSample[] = [];
    const others = new Map<string, QueueDepthSample>();
    for (const sample of samples) {
      if (this.options.tenants.of(sample.tenant ?? '') !== OTHER_TENANTS) {
        kept.push(sample);
        continue;
      }
      const key = `${sample.stage}\0${sample.queue}`;
      const seen = others.get(key);
      if (seen === undefined) {
        others.set(key, { ...sample, tenant: OTHER_TENANTS, physicalQueue: OTHER_TENANTS });
        continue;
      }
      seen.depth += sample.depth;
      seen.maxSize = seen.maxSize === undefined || sample.maxSize === undefined ? undefined : seen.maxSize + sample.maxSize;
    }
    return others.size === 0 ? samples : [...kept, ...others.values()];
  }
}

function labelsOf(s: QueueDepthSample): Record<QueueLabelName, string> {
  return { stage: s.stage, queue: s.queue, tenant: s.tenant ?? '', physical_queue: s.physicalQueue };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`queue depth source did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
