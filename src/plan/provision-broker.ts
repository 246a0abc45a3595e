import type { AdminEvent, AdminEventSink } from '../events/admin-events.js';
import { openConnection } from '../broker/amqp-connection.js';
import { checkSameBroker } from '../broker/same-broker.js';
import { declareTopology, PROVISION_LANES } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import { ListedFlags } from '../flags/listed-flags.js';
import type { Logger } from '../logging/logger.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { ManagementClient, managementClientOf } from '../broker-management/management-client.js';
import { provisionBrokerUsers } from '../security/tenant-users.js';
import { provisionTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import type { StageEndpoints, Topology } from '../topology/topology.types.js';
import { readInventory } from './broker-inventory.js';
import { missingTopology } from './missing-topology.js';
import { syncQueueSettings, type SettingsSync } from './queue-settings.js';

/** How long `provision` waits for one management API call. */
export const PROVISION_API_TIMEOUT_MS = 120_000;

export interface ProvisionResult {
  /** Everything provisioned (what `provisionTopology` lists). */
  topology: Topology;
  /** The part of it that was missing on the broker, and was declared. */
  declared: Topology;
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
  options: { tenant?: string; api?: ManagementClient; onEvent?: AdminEventSink } = {},
): Promise<ProvisionResult> {
  const topology = provisionTopology(config, stages, options.tenant);
  const tenants = options.tenant === undefined ? config.tenants : [options.tenant];
  const names = new BrokerNames(config.prefix);
  // A policy put walks every queue of the virtual host, and the listings hold every object: at
  // tens of thousands of queues both take longer than the default 10 s.
  const api = options.api ?? managementClientOf(config, PROVISION_API_TIMEOUT_MS);
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const connection = await openConnection(config, log, 'stagecoach-declare');
  let missing: Topology;
  let fresh: string[];
  let settings: SettingsSync;
  // Their events wait for the declarations: the events exchange may not exist before them.
  const settingsEvents: AdminEvent[] = [];
  try {
    // The inventory, the policies and the declarations must be of one broker.
    await checkSameBroker(config, api, log, connection);
    // The queue settings go first. A policy put while its queues exist is applied to each of
    // them by the broker inside the PUT: `<prefix>.queues` (the classic queue version) converted
    // every queue of the prefix in place, and at 1,000 tenants the PUT outran the management
    // API's timeout (provision failed after declaring everything). A queue declared under its
    // policy gets it as it is created. Unchanged policies are not put again.
    settings = await syncQueueSettings(config, stages, api, {
      removeStale: true,
      log,
      onEvent: (event) => {
        settingsEvents.push(event);
        return Promise.resolve();
      },
    });
    // One listing of what is there (also the tenants already provisioned, for the events) rather
    // than a round trip per object: only what is missing or different is declared.
    const inventory = await readInventory(config, api);
    const present = new Set(inventory.exchanges.map((exchange) => exchange.name));
    fresh = options.onEvent === undefined ? [] : tenants.filter((tenant) => !present.has(names.tenantExchange(tenant)));
    missing = missingTopology(topology, inventory);
    // The operator has the management API (the queue settings above need it anyway): the drain
    // markers are read with one listing before and one after the bindings, not per entry.
    await declareTopology(connection, missing, log, { lanes: PROVISION_LANES, drainMarkers: new ListedFlags(api, vhost) });
  } finally {
    await connection.close().catch(() => undefined);
  }
  log.info('topology provisioned', {
    exchanges: topology.exchanges.length,
    queues: topology.queues.length,
    bindings: topology.bindings.length,
    declared: { exchanges: missing.exchanges.length, queues: missing.queues.length, bindings: missing.bindings.length },
  });
  // All at once: one by one, each waiting for its confirm, 1,000 new tenants took about a second.
  const onEvent = options.onEvent;
  if (onEvent !== undefined) {
    for (const event of settingsEvents) await onEvent(event);
    await Promise.all(fresh.map((tenant) => onEvent({ type: 'tenant.provisioned', data: { tenant } })));
  }
  let users: string[] = [];
  if (config.security.tenantUsers) {
    users = await provisionBrokerUsers(config, api, options.tenant === undefined ? config.tenants : [options.tenant]);
    log.info('broker users provisioned', { users });
  }
  return { topology, declared: missing, settings, users };
}
