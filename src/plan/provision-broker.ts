import type { AdminEventSink } from '../admin/admin-events.js';
import { openConnection } from '../broker/amqp-connection.js';
import { declareTopology, PROVISION_LANES } from '../broker/declare-topology.js';
import { ListedDrainMarkers } from '../broker/drain-markers.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { ManagementApi } from '../security/management-api.js';
import { provisionBrokerUsers } from '../security/tenant-users.js';
import { provisionTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import type { StageEndpoints, Topology } from '../topology/topology.types.js';
import { syncQueueSettings, type SettingsSync } from './queue-settings.js';

export interface ProvisionResult {
  topology: Topology;
  settings: SettingsSync;
  /** Broker users set up (with `security.tenantUsers`). */
  users: string[];
}

/**
 * What `stagecoach provision` does: declares every exchange, queue and binding (for one tenant
 * or all configured), puts the queue settings (policies, through the management API) and with
 * `security.tenantUsers` the tenants' users and permissions. Idempotent.
 *
 * Events (`onEvent`): `tenant.provisioned` for every tenant whose exchange the broker did not
 * have before (a provision run again announces nothing), once its topology is declared;
 * `queue.config_updated` for every queue setting put or removed.
 *
 * @param stages every stage of the configuration: settings of queues no stage names any more are
 *   removed.
 */
export async function provisionBroker(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  log: Logger,
  options: { tenant?: string; api?: ManagementApi; onEvent?: AdminEventSink } = {},
): Promise<ProvisionResult> {
  const topology = provisionTopology(config, stages, options.tenant);
  const tenants = options.tenant === undefined ? config.tenants : [options.tenant];
  const names = new BrokerNames(config.prefix);
  const api = options.api ?? new ManagementApi(config.broker.management);
  const vhost = vhostOfAmqpUrl(config.broker.url);
  let fresh: string[] = [];
  if (options.onEvent !== undefined) {
    // One listing rather than a passive declare per tenant: thousands of round trips otherwise.
    const present = new Set(await api.listExchangeNames(vhost));
    fresh = tenants.filter((tenant) => !present.has(names.tenantExchange(tenant)));
  }
  const connection = await openConnection(config, log, 'stagecoach-declare');
  try {
    // The operator has the management API (the queue settings below need it anyway): the drain
    // markers are read with one listing before and one after the bindings, not per entry.
    await declareTopology(connection, topology, log, { lanes: PROVISION_LANES, drainMarkers: new ListedDrainMarkers(api, vhost) });
  } finally {
    await connection.close().catch(() => undefined);
  }
  for (const tenant of fresh) await options.onEvent?.({ type: 'tenant.provisioned', data: { tenant } });
  const settings = await syncQueueSettings(config, stages, api, {
    removeStale: true,
    log,
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
  });
  let users: string[] = [];
  if (config.security.tenantUsers) {
    users = await provisionBrokerUsers(config, api, options.tenant === undefined ? config.tenants : [options.tenant]);
    log.info('broker users provisioned', { users });
  }
  return { topology, settings, users };
}
