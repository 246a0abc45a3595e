import type { CompiledConfig } from '../config/config.types.js';
import { bucketsOf, cooldownOf, type Strategy } from '../flow/bucket.js';
import { queueBuckets } from '../flow/limit-resolver.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { managementClientOf, type BrokerQueueStats } from '../broker-management/management-client.js';
import { parseBrokerName } from '../topology/names.js';

/**
 * One flow-limit partition as the broker holds it (OJS rate-limiting extension 10.1, `GET
 * /ojs/v1/rate-limits/{key}`; docs/flow-control.md). Read from the management API's queue
 * statistics, which lag by its collection interval (5 s by default). Jobs waiting for a token
 * wait in the stage processes, not on the broker: each process's `stagecoach_limit_waiting` says
 * how many.
 */
export interface LimitReport {
  /** The partition: `queue:<physical queue>`, `<limit>` or `<limit>@<tenant>`, or a job policy's key. */
  key: string;
  /** Whether the configuration names it (else jobs' own policies made it). */
  configured: boolean;
  concurrency?: { limit: number; tokens: number; active: number; available: number };
  rate?: { limit: number; tokens: number; period_ms: number; current_count: number };
  throttle?: { limit: number; period_ms: number; cooling: boolean };
  /**
   * false when the broker holds no partition yet (no job has needed a token of it): the limit as
   * configured or as a job carries it, every token free. Absent on partitions the broker holds.
   */
  on_broker?: false;
}

/** A limit as configured (`limits.<key>`) or carried by a job, its windows in ms. */
export interface LimitShape {
  concurrency?: number | undefined;
  rate?: { limit: number; periodMs: number } | undefined;
  throttle?: { limit: number; periodMs: number } | undefined;
}

const FLOW = '.flow.';
const QUEUE_PARTITION = 'queue:';

/** Every partition under the prefix, sorted by key; `key` keeps one. */
export async function inspectLimits(config: CompiledConfig, key?: string): Promise<LimitReport[]> {
  const api = managementClientOf(config);
  const stats = await api.queueStatistics(vhostOfAmqpUrl(config.broker.url));
  return buildLimitReports(config, stats, key);
}

/**
 * The report of a partition the broker does not hold yet: its limit with every token free, as
 * the first job to need it will find it.
 */
export function unusedLimitReport(key: string, limit: LimitShape, configured: boolean): LimitReport {
  return {
    key,
    configured,
    ...(limit.concurrency === undefined
      ? {}
      : { concurrency: { limit: limit.concurrency, tokens: limit.concurrency, active: 0, available: limit.concurrency } }),
    ...(limit.rate === undefined
      ? {}
      : { rate: { limit: limit.rate.limit, tokens: limit.rate.limit, period_ms: limit.rate.periodMs, current_count: 0 } }),
    ...(limit.throttle === undefined
      ? {}
      : { throttle: { limit: limit.throttle.limit, period_ms: limit.throttle.periodMs, cooling: false } }),
    on_broker: false,
  };
}

/** The named limit a partition key stands for (`<limit>`, or `<limit>@<tenant>` of a per-tenant limit); undefined when none is configured. */
export function configuredLimitOf(config: CompiledConfig, key: string): LimitShape | undefined {
  const [name, tenant, ...rest] = key.split('@');
  const limit = config.limits.get(name);
  if (limit === undefined || rest.length > 0 || (tenant !== undefined && (!limit.perTenant || tenant === ''))) return undefined;
  return limit;
}

/** The reports out of the queues' statistics (pure, for tests). */
export function buildLimitReports(config: CompiledConfig, stats: readonly BrokerQueueStats[], only?: string): LimitReport[] {
  const base = `${config.prefix}${FLOW}`;
  const byName = new Map(stats.filter((queue) => queue.name.startsWith(base)).map((queue) => [queue.name.slice(base.length), queue]));
  const reports = new Map<string, LimitReport>();
  for (const [name, tokens] of byName) {
    const bucket = parseBucketName(name);
    if (bucket === undefined || (only !== undefined && bucket.partition !== only)) continue;
    const ready = (queue: BrokerQueueStats | undefined): number => queue?.messages_ready ?? 0;
    const ledger = ready(byName.get(`${name}.ledger`));
    const cooling = ready(byName.get(`${name}.cooldown`));
    const held = tokens.messages_unacknowledged ?? 0;
    const report = reports.get(bucket.partition) ?? { key: bucket.partition, configured: false };
    const configured = configuredBuckets(config, bucket.partition).find((b) => b.strategy === bucket.strategy && b.id === name);
    report.configured ||= configured !== undefined || bucket.partition.startsWith(QUEUE_PARTITION);
    const limit = configured?.size ?? ledger;
    const periodMs = bucket.cooldownMs === undefined ? 0 : periodOf(bucket.cooldownMs);
    if (bucket.strategy === 'concurrency') {
      report.concurrency = { limit, tokens: ledger, active: held, available: ready(tokens) };
    } else if (bucket.strategy === 'rate') {
      // A stale window (the period changed) is a bucket nobody takes any more: the configured one wins.
      if (report.rate === undefined || configured !== undefined)
        report.rate = { limit, tokens: ledger, period_ms: periodMs, current_count: cooling + held };
    } else if (report.throttle === undefined || configured !== undefined) {
      const configuredLimit = configuredWindow(config, bucket.partition, 'throttle')?.limit ?? 1;
      report.throttle = { limit: configuredLimit, period_ms: periodMs * configuredLimit, cooling: cooling + held > 0 };
    }
    reports.set(bucket.partition, report);
  }
  return [...reports.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** `<partition>.concurrency` or `<partition>.<rate|throttle>.<cooldown ms>`; the ledger, cooldown and lock queues are not buckets. */
function parseBucketName(name: string): { partition: string; strategy: Strategy; cooldownMs?: number } | undefined {
  const parts = name.split('.');
  const last = parts.at(-1) as string;
  if (last === 'concurrency' && parts.length > 1) return { partition: parts.slice(0, -1).join('.'), strategy: 'concurrency' };
  const strategy = parts.at(-2);
  if (/^\d+$/.test(last) && (strategy === 'rate' || strategy === 'throttle') && parts.length > 2) {
    return { partition: parts.slice(0, -2).join('.'), strategy, cooldownMs: Number(last) };
  }
  return undefined;
}

/** The window a cooldown stands for (see bucket.ts: the window plus 1%, from 5 to 50 ms). */
function periodOf(cooldownMs: number): number {
  for (const margin of [5, 50]) if (cooldownOf(cooldownMs - margin) === cooldownMs) return cooldownMs - margin;
  return Math.round(cooldownMs / 1.01);
}

/**
 * The buckets the configuration makes of a partition now: a queue's own (`queue:<physical>`,
 * its tenant's settings first) or a named limit's. A bucket not among them is stale (its window
 * changed) or a job policy's.
 */
function configuredBuckets(config: CompiledConfig, partition: string): ReturnType<typeof bucketsOf> {
  if (partition.startsWith(QUEUE_PARTITION)) {
    const physical = partition.slice(QUEUE_PARTITION.length);
    const parsed = parseBrokerName(config.prefix, physical);
    if (parsed?.kind !== 'queue' || parsed.queue === undefined) return [];
    return queueBuckets(config, { queue: parsed.queue, physical, tenant: parsed.tenant });
  }
  const limit = config.limits.get(partition.split('@')[0]);
  return limit === undefined ? [] : bucketsOf(partition, limit);
}

function configuredWindow(config: CompiledConfig, partition: string, strategy: 'rate' | 'throttle'): { limit: number } | undefined {
  return config.limits.get(partition.split('@')[0])?.[strategy];
}
