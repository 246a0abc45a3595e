import type { CompiledConfig } from '../config/config.types.js';
import { identitiesOf, vhostOfAmqpUrl } from '../security/broker-users.js';
import type { BrokerBinding, BrokerExchange, BrokerPolicy, BrokerQueue, ManagementClient } from '../broker-management/management-client.js';

/** What the broker holds under one prefix, read through the management API. */
export interface BrokerInventory {
  vhost: string;
  queues: BrokerQueue[];
  exchanges: BrokerExchange[];
  /** Bindings with a source or destination under the prefix (the default exchange's left out). */
  bindings: BrokerBinding[];
  /** Every policy of the virtual host (the caller tells which are stagecoach's). */
  policies: BrokerPolicy[];
  /** Producer and stage users of the prefix, and the internal user; only with `security.tenantUsers`. */
  users: string[];
}

/**
 * Reads the broker's queues, exchanges, bindings, policies (and users) under `config.prefix`.
 * Names and arguments only: they are current at once, unlike the statistics the management
 * plugin collects every few seconds.
 */
export async function readInventory(config: CompiledConfig, api: ManagementClient): Promise<BrokerInventory> {
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const ours = (name: string): boolean => name.startsWith(`${config.prefix}.`);
  const [queues, exchanges, bindings, policies, users] = await Promise.all([
    api.listQueues(vhost),
    api.listExchanges(vhost),
    api.listBindings(vhost),
    api.listPolicies(vhost),
    config.security.tenantUsers ? api.listUsers() : Promise.resolve([]),
  ]);
  const identities = identitiesOf(config);
  return {
    vhost,
    queues: queues.filter((queue) => ours(queue.name)),
    exchanges: exchanges.filter((exchange) => ours(exchange.name)),
    bindings: bindings.filter((binding) => binding.source !== '' && (ours(binding.source) || ours(binding.destination))),
    policies,
    users: users.filter((user) => user === identities.internal || identities.tenantOf(user) !== undefined),
  };
}
