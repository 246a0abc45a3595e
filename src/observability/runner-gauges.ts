import { Gauge, type Registry } from 'prom-client';
import { STAGE_LABELS, type StageLabelName } from './instance-metrics.js';
import type { RunnerSample } from './metric-types.js';
import { OTHER_TENANTS, type TenantLabels } from './tenant-labels.js';

/**
 * `stagecoach_consuming` and `stagecoach_jobs_in_flight`, read from the runner sources of their
 * owners at every scrape (see StageMetrics.setRunnerSource). The tenants beyond the cap
 * (TenantLabels) make one `_other` series per stage and queue: consuming only while all of them
 * do, their jobs in flight summed.
 */
export class RunnerGauges {
  /** By owner, as the queue depth sources. */
  private readonly sources = new Map<object, () => readonly RunnerSample[]>();

  constructor(registry: Registry, tenants: TenantLabels) {
    const sources = this.sources;
    const runnerGauge = (
      name: string,
      help: string,
      value: (sample: RunnerSample) => number,
      combine: (a: number, b: number) => number,
    ): Gauge<StageLabelName> =>
      new Gauge({
        name,
        help,
        labelNames: [...STAGE_LABELS],
        registers: [registry],
        collect() {
          if (sources.size === 0) return;
          // Tenants released since the last scrape leave no stale series.
          this.reset();
          const others = new Map<string, { stage: string; queue: string; value: number }>();
          for (const sample of [...sources.values()].flatMap((source) => source())) {
            const tenant = tenants.of(sample.tenant);
            if (tenant !== OTHER_TENANTS) {
              this.set({ stage: sample.stage, queue: sample.queue, tenant }, value(sample));
              continue;
            }
            // Beyond the cap: one series per stage and queue, their values combined.
            const key = `${sample.stage}\0${sample.queue}`;
            const seen = others.get(key);
            if (seen === undefined) others.set(key, { stage: sample.stage, queue: sample.queue, value: value(sample) });
            else seen.value = combine(seen.value, value(sample));
          }
          for (const { stage, queue, value: v } of others.values()) this.set({ stage, queue, tenant: OTHER_TENANTS }, v);
        },
      });
    runnerGauge(
      'stagecoach_consuming',
      'Whether the instance consumes as it should (1), or should and does not (0).',
      (s) => (s.consuming ? 1 : 0),
      Math.min,
    );
    runnerGauge(
      'stagecoach_jobs_in_flight',
      'Jobs of the instance being processed or settled now.',
      (s) => s.inFlight,
      (a, b) => a + b,
    );
  }

  /** `owner`'s source, replacing its previous one; `undefined` removes it. */
  setSource(source: (() => readonly RunnerSample[]) | undefined, owner: object): void {
    if (source === undefined) this.sources.delete(owner);
    else this.sources.set(owner, source);
  }
}
