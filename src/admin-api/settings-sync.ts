import type { CompiledConfig } from '../config/config.types.js';
import { toBrokerPolicy } from '../plan/queue-settings.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import type { BrokerPolicy, ManagementApi } from '../security/management-api.js';
import { provisionQueues } from '../topology/build-topology.js';
import { parseBrokerName } from '../topology/names.js';
import { isStagecoachPolicy, queuePolicies } from '../topology/queue-policies.js';
import type { StageEndpoints } from '../topology/topology.types.js';

export interface PolicyChanges {
  put: string[];
  deleted: string[];
}

/**
 * Puts the configuration's queue settings (policies, see queue-policies.ts) of some logical
 * queues on the broker, as `apply` would for them: policies that are missing or differ are put,
 * stagecoach policies of those queues that the configuration no longer has are deleted. Policies
 * of other queues are never touched, so a change of one queue cannot disturb another, and a
 * queue the admin server does not know (a stage module it could not load) keeps its policies.
 *
 * @param queues the logical queues whose settings changed; undefined: every queue `provision`
 *   knows (a change of `_default`).
 */
export async function syncSettingsOf(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  api: ManagementApi,
  queues?: readonly string[],
): Promise<PolicyChanges> {
  const affected = new Set(queues ?? provisionQueues(config, stages).map((queue) => queue.name));
  const concerns = (name: string): boolean => {
    const parsed = parseBrokerName(config.prefix, name);
    return isStagecoachPolicy(config.prefix, name) && parsed?.queue !== undefined && affected.has(parsed.queue);
  };
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const wanted = queuePolicies(config, stages)
    .filter((policy) => concerns(policy.name))
    .map(toBrokerPolicy);
  const current = new Map((await api.listPolicies(vhost)).filter((policy) => concerns(policy.name)).map((p) => [p.name, p]));
  const changes: PolicyChanges = { put: [], deleted: [] };
  for (const policy of wanted) {
    const existing = current.get(policy.name);
    if (existing !== undefined && samePolicy(existing, policy)) continue;
    await api.putPolicy(vhost, policy);
    changes.put.push(policy.name);
  }
  const names = new Set(wanted.map((policy) => policy.name));
  for (const name of current.keys()) {
    if (names.has(name)) continue;
    await api.deletePolicy(vhost, name);
    changes.deleted.push(name);
  }
  return changes;
}

function samePolicy(a: BrokerPolicy, b: BrokerPolicy): boolean {
  if (a.pattern !== b.pattern || a.priority !== b.priority || a['apply-to'] !== b['apply-to']) return false;
  const keys = new Set([...Object.keys(a.definition), ...Object.keys(b.definition)]);
  return [...keys].every((key) => String(a.definition[key]) === String(b.definition[key]));
}
