import type { CompiledConfig } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import type { BrokerQueueStats } from '../broker-management/management-client.js';
import { QueueStates, type QueueState } from '../queue-state/queue-state.js';
import { BrokerNames, parseBrokerName } from '../topology/names.js';
import { buildLimitReports } from './limit-report.js';
import { queueLimitsOf, type QueueLimits } from './queue-flow-limits.js';

/**
 * A companion queue of a work queue (`due`, `suspect`, dead letters). Counts are null when the
 * queue does not exist or the management plugin has not sampled it yet.
 */
export interface CompanionDepth {
  name: string;
  exists: boolean;
  ready: number | null;
  unacked: number | null;
}

/**
 * One physical work queue as an operator sees it: what it is, its state, what it holds, how fast
 * jobs come and go, how full it is, and what waits beside it.
 *
 * Counts and rates are the management plugin's sampled values: they lag by its collection
 * interval (5 s by default), and are null for a queue it has not sampled yet.
 */
export interface QueueReport {
  /** The physical queue: `<prefix>.queue.<queue>[.<tenant>[.<variant>]]`. */
  name: string;
  /** The logical queue. */
  queue: string;
  scope: 'tenant' | 'shared';
  tenant?: string;
  variant?: string;
  /** From the marker exchanges (src/queue-state/queue-state.ts). */
  state: QueueState;
  /** Draining, and its main, `due` and `suspect` queues hold nothing ready or unacknowledged. */
  drained: boolean;
  ready: number | null;
  unacked: number | null;
  consumers: number | null;
  /** Messages per second, as the plugin last sampled them. */
  publish_rate: number | null;
  deliver_rate: number | null;
  /** The bound the broker enforces (its effective policy, or a queue argument of an older declaration); null: unbounded. */
  max_size: number | null;
  /** Where `max_size` comes from: `policy <name>` or `argument`; null when unbounded. */
  max_size_source: string | null;
  /** What the configuration says for this queue (per-tenant overrides included); it differs from `max_size` until `apply`. */
  configured_max_size: number | null;
  /** `ready / max_size` (RabbitMQ's max-length counts ready messages only); null when unbounded or not sampled. */
  max_size_use: number | null;
  due: CompanionDepth;
  suspect: CompanionDepth;
  /** Shared by a tenant's general and variant queues (dead letters are per logical queue and tenant). */
  dead: CompanionDepth;
  /** Its own flow limits in force and the jobs running under them (docs/flow-control.md); null: none applies. */
  limits: QueueLimits | null;
}

/**
 * Reports on every physical work queue under `config.prefix` (shared, tenant and variant queues)
 * found in `queues`, with states read from `exchangeNames` and flow limits' partitions from the
 * `<prefix>.flow.*` queues among `queues`. Pure: `inspectQueues` gathers the
 * two lists from the management API. Sorted by logical queue, tenant, then variant (the general
 * queue first).
 */
export function buildQueueReports(
  config: CompiledConfig,
  queues: readonly BrokerQueueStats[],
  exchangeNames: Iterable<string>,
  filter: { tenant?: string; queue?: string } = {},
): QueueReport[] {
  const names = new BrokerNames(config.prefix);
  const states = new QueueStates(config.prefix, exchangeNames);
  const byName = new Map(queues.map((queue) => [queue.name, queue]));
  // The flow partitions are queues under the prefix too (`<prefix>.flow.*`): the same statistics.
  const partitions = new Map(buildLimitReports(config, queues).map((report) => [report.key, report]));
  const reports: QueueReport[] = [];
  for (const stats of queues) {
    const parsed = parseBrokerName(config.prefix, stats.name);
    if (parsed?.kind !== 'queue' || parsed.queue === undefined) continue;
    const { queue, tenant, variant } = parsed;
    if (filter.queue !== undefined && queue !== filter.queue) continue;
    if (filter.tenant !== undefined && tenant !== filter.tenant) continue;
    const target = { queue, ...(tenant === undefined ? {} : { tenant }), ...(variant === undefined ? {} : { variant }) };
    const state = states.of(target);
    const due = companion(byName, names.dueQueue(queue, tenant, variant));
    const suspect = companion(byName, names.suspectQueue(queue, tenant, variant));
    const ready = count(stats.messages_ready);
    const unacked = count(stats.messages_unacknowledged);
    const bound = enforcedMaxSize(stats);
    reports.push({
      name: stats.name,
      queue,
      scope: tenant === undefined ? 'shared' : 'tenant',
      ...(tenant === undefined ? {} : { tenant }),
      ...(variant === undefined ? {} : { variant }),
      state,
      drained: state === 'draining' && ready === 0 && unacked === 0 && isEmpty(due) && isEmpty(suspect),
      ready,
      unacked,
      consumers: count(stats.consumers),
      publish_rate: count(stats.message_stats?.publish_details?.rate),
      deliver_rate: count(stats.message_stats?.deliver_get_details?.rate),
      max_size: bound?.size ?? null,
      max_size_source: bound?.source ?? null,
      configured_max_size: settingsFor(config, queue, tenant).max_size ?? null,
      max_size_use: bound === undefined || ready === null ? null : ready / bound.size,
      due,
      suspect,
      dead: companion(byName, names.deadQueue(queue, tenant)),
      limits: queueLimitsOf(config, { physical: stats.name, queue, tenant }, partitions),
    });
  }
  return reports.sort(
    (a, b) =>
      a.queue.localeCompare(b.queue) || (a.tenant ?? '').localeCompare(b.tenant ?? '') || (a.variant ?? '').localeCompare(b.variant ?? ''),
  );
}

function companion(byName: ReadonlyMap<string, BrokerQueueStats>, name: string): CompanionDepth {
  const stats = byName.get(name);
  if (stats === undefined) return { name, exists: false, ready: null, unacked: null };
  return { name, exists: true, ready: count(stats.messages_ready), unacked: count(stats.messages_unacknowledged) };
}

/** A missing companion queue holds nothing; a count not sampled yet is not known to be zero. */
function isEmpty(depth: CompanionDepth): boolean {
  return !depth.exists || (depth.ready === 0 && depth.unacked === 0);
}

function count(value: number | undefined): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/**
 * The bound the broker enforces: the effective policy's `max-length` wins over the queue's
 * `x-max-length` argument, as in RabbitMQ (the lower of the two applies when both are set).
 */
function enforcedMaxSize(stats: BrokerQueueStats): { size: number; source: string } | undefined {
  const definition = stats.effective_policy_definition;
  const fromPolicy = definition !== undefined && !Array.isArray(definition) ? definition['max-length'] : undefined;
  const fromArgument = stats.arguments?.['x-max-length'];
  const candidates: Array<{ size: number; source: string }> = [];
  if (typeof fromPolicy === 'number') candidates.push({ size: fromPolicy, source: `policy ${stats.policy ?? '(unnamed)'}` });
  if (typeof fromArgument === 'number') candidates.push({ size: fromArgument, source: 'argument' });
  return candidates.sort((a, b) => a.size - b.size)[0];
}
