import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { SETTING_KEYS, settingsFor } from '../config/queue-resolver.js';
import type { QueueReport } from '../inspect/queue-report.js';
import type { QueueState } from '../queue-state/queue-state.js';

/**
 * The JSON the admin API answers with, built from the configuration and the inspection reports
 * (src/inspect). Field names follow OJS queue configuration (snake_case).
 */

/** A queue's effective configuration (OJS queue configuration section 6 fields that stagecoach has, and every setting), `null` for unlimited. */
export function configView(config: CompiledConfig, name: string, tenant?: string): Record<string, unknown> {
  // Not queueFor: under strict_queues it refuses a queue found on the broker but not configured, which is still shown.
  const queue: ResolvedQueueConfig = config.queues.get(name) ?? config.defaultQueue;
  const settings = settingsFor(config, name === '_default' ? '' : name, tenant);
  // The compiled milliseconds are stagecoach's own; the answer keeps the OJS fields.
  const retry: Record<string, unknown> = { ...queue.default_retry };
  delete retry.initialIntervalMs;
  delete retry.maxIntervalMs;
  return {
    scope: queue.scope,
    ...(queue.variants === undefined ? {} : { variants: queue.variants }),
    // Every declared setting, `null` where none applies (unlimited).
    ...Object.fromEntries(SETTING_KEYS.map((key) => [key, settings[key] ?? null])),
    ...(queue.dead_letter_queue === undefined ? {} : { dead_letter_queue: queue.dead_letter_queue }),
    ...(queue.default_timeout === undefined ? {} : { default_timeout: queue.default_timeout }),
    ...(queue.allowed_job_types === undefined ? {} : { allowed_job_types: queue.allowed_job_types }),
    ...(queue.max_priority === undefined ? {} : { max_priority: queue.max_priority }),
    default_retry: retry,
  };
}

/**
 * Counts over some physical queues, summed (a count the plugin has not sampled yet adds 0):
 * `available` is what waits ready in the main, `due` and `suspect` queues, `active` what stages
 * hold unacknowledged there, `depth` both; `due`, `suspect` and `dead` are those queues' depths
 * (a dead-letter queue shared by a tenant's variant queues counts once). Jobs waiting on the
 * delay ladder (retries, scheduled jobs) are not counted: the ladder is shared by every queue.
 */
export interface StatsView {
  depth: number;
  available: number;
  active: number;
  due: number;
  suspect: number;
  dead: number;
  consumers: number;
  /** Messages per second, the management plugin's sampled rates. */
  publish_rate: number;
  deliver_rate: number;
}

export function statsView(reports: readonly QueueReport[]): StatsView {
  const n = (value: number | null): number => value ?? 0;
  const stats: StatsView = {
    depth: 0,
    available: 0,
    active: 0,
    due: 0,
    suspect: 0,
    dead: 0,
    consumers: 0,
    publish_rate: 0,
    deliver_rate: 0,
  };
  const deadSeen = new Set<string>();
  for (const r of reports) {
    stats.available += n(r.ready) + n(r.due.ready) + n(r.suspect.ready);
    stats.active += n(r.unacked) + n(r.due.unacked) + n(r.suspect.unacked);
    stats.due += n(r.due.ready) + n(r.due.unacked);
    stats.suspect += n(r.suspect.ready) + n(r.suspect.unacked);
    if (!deadSeen.has(r.dead.name)) stats.dead += n(r.dead.ready) + n(r.dead.unacked);
    deadSeen.add(r.dead.name);
    stats.consumers += n(r.consumers);
    stats.publish_rate += n(r.publish_rate);
    stats.deliver_rate += n(r.deliver_rate);
  }
  stats.depth = stats.available + stats.active;
  return stats;
}

/**
 * One state for several physical queues: theirs when they agree, `mixed` when they do not
 * (`states` then says how many are in which), `active` when there are none yet (no marker).
 * `drained` when every one is drained.
 */
export function stateView(reports: readonly QueueReport[]): {
  state: QueueState | 'mixed';
  drained: boolean;
  states: Partial<Record<QueueState, number>>;
} {
  const states: Partial<Record<QueueState, number>> = {};
  for (const r of reports) states[r.state] = (states[r.state] ?? 0) + 1;
  const distinct = Object.keys(states) as QueueState[];
  return {
    state: distinct.length === 0 ? 'active' : distinct.length === 1 ? distinct[0] : 'mixed',
    drained: reports.length > 0 && reports.every((r) => r.drained),
    states,
  };
}
