import type { CompiledConfig } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import { parseDuration } from '../util/duration.js';
import type { LimitReport } from './limit-report.js';

/**
 * A physical work queue's own flow limits (docs/flow-control.md): what the configuration puts in
 * force on it (`queues.<q>.concurrency`, `rate_limit`, the tenant's own settings first), and, once
 * the broker holds its partition (the first job that needed a token made it), what runs under
 * them. The counts come from the same management API statistics as the queue's: up to the
 * plugin's collection interval (5 s by default) old.
 */
export interface QueueLimits {
  /** The partition: `queue:<physical queue>`, as `stagecoach limits --key` and `GET /ojs/v1/rate-limits/{key}` name it. */
  key: string;
  /** Jobs active at once from this physical queue, across every process; null: unlimited. */
  concurrency: number | null;
  /** Starts from this physical queue in any window of `period` (ISO 8601; `period_ms` in ms); null: unlimited. */
  rate_limit: { limit: number; period: string; period_ms: number } | null;
  /**
   * Jobs running under `concurrency` now (its tokens held); null without a concurrency limit, or
   * while the broker holds no partition yet (no job has needed a token).
   */
  active: number | null;
  /** Starts in the current window of `rate_limit`; null without one, or without a partition yet. */
  current_count: number | null;
}

/**
 * The limits of `physical` (of logical `queue`, for `tenant`), with what `partitions` (the
 * broker's flow partitions by key, from `buildLimitReports`) says runs under them; null when no
 * flow limit applies to the queue.
 */
export function queueLimitsOf(
  config: CompiledConfig,
  target: { physical: string; queue: string; tenant: string | undefined },
  partitions: ReadonlyMap<string, LimitReport>,
): QueueLimits | null {
  const settings = settingsFor(config, target.queue, target.tenant);
  const window = settings.rate_limit;
  if (settings.concurrency === undefined && window === undefined) return null;
  const key = `queue:${target.physical}`;
  const partition = partitions.get(key);
  return {
    key,
    concurrency: settings.concurrency ?? null,
    rate_limit: window === undefined ? null : { limit: window.limit, period: window.period, period_ms: parseDuration(window.period) ?? 0 },
    active: settings.concurrency === undefined ? null : (partition?.concurrency?.active ?? null),
    current_count: window === undefined ? null : (partition?.rate?.current_count ?? null),
  };
}

const UNITS: ReadonlyArray<[number, string]> = [
  [1000, 's'],
  [60_000, 'min'],
  [3_600_000, 'h'],
  [86_400_000, 'd'],
];

/**
 * One compact cell for people: `3/5 run` (jobs running / concurrency; `-/5 run` before the
 * broker holds the partition), `20/s` (the rate limit, per its window: `100/min`, `10/PT10S`),
 * both side by side, or `-` without a limit.
 */
export function formatQueueLimits(limits: QueueLimits | null): string {
  if (limits === null) return '-';
  const parts: string[] = [];
  if (limits.concurrency !== null) parts.push(`${limits.active ?? '-'}/${limits.concurrency} run`);
  if (limits.rate_limit !== null) {
    const unit = UNITS.find(([ms]) => ms === limits.rate_limit?.period_ms)?.[1];
    parts.push(`${limits.rate_limit.limit}/${unit ?? limits.rate_limit.period}`);
  }
  return parts.join(' ');
}
