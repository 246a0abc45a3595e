import type { AdminEventSink } from '../events/admin-events.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import type { BrokerPolicy, ManagementClient } from '../broker-management/management-client.js';
import { isStagecoachPolicy, policyTarget, queuePolicies } from '../topology/queue-policies.js';
import type { PolicySpec, StageEndpoints } from '../topology/topology.types.js';

export interface SettingsSync {
  /** Policies created or changed. */
  put: string[];
  /** Stale stagecoach policies deleted. */
  deleted: string[];
}

/** A policy as the management API takes it. */
export function toBrokerPolicy(policy: PolicySpec): BrokerPolicy {
  return {
    name: policy.name,
    pattern: policy.pattern,
    'apply-to': policy.applyTo,
    priority: policy.priority,
    definition: policy.definition,
  };
}

/**
 * Puts the configuration's queue settings on the broker (`max_size`, `overflow_policy`,
 * `dead_letter_ttl`...: see queue-policies.ts): every policy that is missing or differs. The
 * broker applies a policy to the running queues at once: no stage notices but by the new bound.
 *
 * @param removeStale also delete stagecoach's policies the configuration no longer has (the
 *   caller knows every stage, as `provision` does); a caller that knows only some stages leaves
 *   them, since a policy of a queue only another stage uses would look stale.
 * @param queues only the policies of these logical queues are put or removed (the admin API
 *   changing one queue); every queue when absent.
 */
export async function syncQueueSettings(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  api: ManagementClient,
  options: { removeStale: boolean; queues?: readonly string[]; log?: Logger; onEvent?: AdminEventSink },
): Promise<SettingsSync> {
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const scope = options.queues === undefined ? undefined : new Set(options.queues);
  const concerns = (name: string): boolean => {
    if (!isStagecoachPolicy(config.prefix, name)) return false;
    const target = policyTarget(config.prefix, name);
    return scope === undefined || (target !== undefined && scope.has(target.queue));
  };
  const wanted = queuePolicies(config, stages).filter((policy) => concerns(policy.name));
  const current = new Map((await api.listPolicies(vhost)).filter((policy) => concerns(policy.name)).map((p) => [p.name, p]));
  const result: SettingsSync = { put: [], deleted: [] };
  for (const policy of wanted) {
    const existing = current.get(policy.name);
    if (existing !== undefined && samePolicy(existing, toBrokerPolicy(policy))) continue;
    await api.putPolicy(vhost, toBrokerPolicy(policy));
    result.put.push(policy.name);
    await options.onEvent?.({
      type: 'queue.config_updated',
      data: { ...settingsEventTarget(config.prefix, policy.name), policy: policy.name, definition: policy.definition },
    });
  }
  if (options.removeStale) {
    const names = new Set(wanted.map((policy) => policy.name));
    for (const name of current.keys()) {
      if (names.has(name)) continue;
      await api.deletePolicy(vhost, name);
      result.deleted.push(name);
      await options.onEvent?.({
        type: 'queue.config_updated',
        data: { ...settingsEventTarget(config.prefix, name), policy: name, definition: {} },
      });
    }
  }
  if (result.put.length + result.deleted.length > 0) options.log?.info('queue settings applied', { ...result });
  return result;
}

/**
 * The `queue` and `tenant` of a `queue.config_updated` event about a policy; `dead_letters` when
 * the settings are the dead-letter queues' (retention) rather than the queue's own.
 */
export function settingsEventTarget(prefix: string, policy: string): Record<string, unknown> {
  const target = policyTarget(prefix, policy);
  if (target === undefined) return {};
  return { queue: target.queue, ...(target.tenant === undefined ? {} : { tenant: target.tenant }), dead_letters: target.dead };
}

function samePolicy(a: BrokerPolicy, b: BrokerPolicy): boolean {
  if (a.pattern !== b.pattern || a.priority !== b.priority || a['apply-to'] !== b['apply-to']) return false;
  const keys = new Set([...Object.keys(a.definition), ...Object.keys(b.definition)]);
  return [...keys].every((key) => String(a.definition[key]) === String(b.definition[key]));
}

/**
 * Deletes every stagecoach policy of the prefix (tests, and library users tearing a prefix
 * down). @returns the names deleted.
 */
export async function deleteQueueSettings(config: CompiledConfig, api: ManagementClient): Promise<string[]> {
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const ours = (await api.listPolicies(vhost)).filter((policy) => isStagecoachPolicy(config.prefix, policy.name));
  for (const policy of ours) await api.deletePolicy(vhost, policy.name);
  return ours.map((policy) => policy.name);
}
