import type { AdminEventSink } from '../admin/admin-events.js';
import { openConnection } from '../broker/amqp-connection.js';
import { declareTopology } from '../broker/declare-topology.js';
import { exchangeExists } from '../broker/exchange-exists.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
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
  const fresh: string[] = [];
  const connection = await openConnection(config, log, 'stagecoach-declare');
  try {
    if (options.onEvent !== undefined) {
      for (const tenant of tenants) if (!(await exchangeExists(connection, names.tenantExchange(tenant)))) fresh.push(tenant);
    }
    await declareTopology(connection, topology, log);
  } finally {
    await connection.close().catch(() => undefined);
  }
  for (const tenant of fresh) await options.onEvent?.({ type: 'tenant.provisioned', data: { tenant } });
  const api = options.api ?? new ManagementApi(config.broker.management);
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
