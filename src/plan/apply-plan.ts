import type { AmqpConnection } from '../broker/amqp-connection.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { ManagementClient } from '../broker-management/management-client.js';
import { provisionBrokerUsers } from '../security/tenant-users.js';
import type { BindingSpec, ExchangeSpec, PolicySpec, QueueSpec } from '../topology/topology.types.js';
import type { AdminEventSink } from '../events/admin-events.js';
import { APPLIED, type Plan, type PlanChange } from './plan.js';
import { settingsEventTarget, toBrokerPolicy } from './queue-settings.js';
import { parseBrokerName } from '../topology/names.js';

export interface ApplyResult {
  /** The changes carried out. */
  applied: PlanChange[];
  /** Left to the operator: `recreate` and `retire`. */
  skipped: PlanChange[];
}

/**
 * Carries out a plan's `add`, `change` and `remove`: declares what is missing (exchanges, then
 * queues, then bindings), removes stale bindings between configured objects, puts and deletes
 * stagecoach's policies, and with `security.tenantUsers` provisions the configured tenants'
 * users and permissions. Nothing of it deletes a queue or a job; `recreate` and `retire` are
 * reported, never done. Idempotent: applying the plan read again afterwards changes nothing.
 *
 * Events (`onEvent`): `tenant.provisioned` for each tenant exchange added, `queue.config_updated`
 * for each policy put or deleted.
 */
export async function applyPlan(
  config: CompiledConfig,
  plan: Plan,
  connection: AmqpConnection,
  api: ManagementClient,
  log: Logger,
  onEvent?: AdminEventSink,
): Promise<ApplyResult> {
  const applied = plan.changes.filter((change) => APPLIED.has(change.action));
  const skipped = plan.changes.filter((change) => !APPLIED.has(change.action));
  const wanted = <T>(kind: PlanChange['kind'], action: PlanChange['action']): T[] =>
    applied.filter((change) => change.kind === kind && change.action === action).map((change) => change.wanted as T);

  await declareTopology(
    connection,
    {
      exchanges: wanted<ExchangeSpec>('exchange', 'add'),
      queues: wanted<QueueSpec>('queue', 'add'),
      bindings: wanted<BindingSpec>('binding', 'add'),
    },
    log,
  );

  // A tenant exchange the broker lacked is a tenant provisioned now (a configured tenant new to the broker).
  for (const change of applied.filter((c) => c.kind === 'exchange' && c.action === 'add')) {
    const parsed = parseBrokerName(config.prefix, change.name);
    if (parsed?.kind === 'tenant' && parsed.tenant !== undefined) {
      await onEvent?.({ type: 'tenant.provisioned', data: { tenant: parsed.tenant } });
    }
  }

  const stale = applied
    .filter((change) => change.kind === 'binding' && change.action === 'remove')
    .map((change) => change.current as BindingSpec);
  if (stale.length > 0) {
    const channel = await connection.createChannel();
    try {
      for (const binding of stale) {
        if (binding.destinationType === 'queue')
          await channel.unbindQueue(binding.destination, binding.source, binding.routingKey, binding.arguments ?? {});
        else await channel.unbindExchange(binding.destination, binding.source, binding.routingKey, binding.arguments ?? {});
      }
    } finally {
      await channel.close().catch(() => undefined);
    }
  }

  for (const change of applied.filter((c) => c.kind === 'policy')) {
    if (change.action === 'remove') await api.deletePolicy(plan.vhost, change.name);
    else await api.putPolicy(plan.vhost, toBrokerPolicy(change.wanted as PolicySpec));
    log.info('queue settings changed', { policy: change.name, action: change.action, detail: change.detail });
    await onEvent?.({
      type: 'queue.config_updated',
      data: { ...settingsEventTarget(config.prefix, change.name), policy: change.name, action: change.action, detail: change.detail ?? '' },
    });
  }

  if (config.security.tenantUsers) {
    const users = await provisionBrokerUsers(config, api, config.tenants);
    log.info('broker users provisioned', { users });
  }
  return { applied, skipped };
}
