import type { AdminEventSink } from '../admin/admin-events.js';
import { declareTopologyOnce } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { ManagementApi } from '../security/management-api.js';
import { provisionBrokerUsers } from '../security/tenant-users.js';
import { provisionTopology } from '../topology/build-topology.js';
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
  await declareTopologyOnce(config, topology, log);
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
