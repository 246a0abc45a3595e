import type { CompiledConfig } from '../config/config.types.js';
import { ConfigError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import type { ManagementClient } from '../broker-management/management-client.js';
import { openConnection, type AmqpConnection } from './amqp-connection.js';
import { nodeOf } from './broker-nodes.js';

/**
 * Refuses to work with two brokers at once: the management API (`broker.management`) must
 * belong to the cluster of the AMQP node the process is connected to, or `provision` would
 * declare on one broker what it compared with, and put policies and users on, another. The
 * cluster name is what tells them apart: the AMQP node sends it when the connection opens
 * (`cluster_name`), the management API answers it (`GET /api/cluster-name`). Every node of a
 * cluster gives the same one.
 *
 * Called before the management API is used by the commands that use both (`provision`, `plan`,
 * `apply`); it opens a connection of its own when given none.
 *
 * @throws ConfigError on `broker.management` when the names differ; the management API's own
 *   failure (MANAGEMENT_FAILED) when it does not answer.
 */
export async function checkSameBroker(
  config: CompiledConfig,
  api: ManagementClient,
  log: Logger,
  connection?: AmqpConnection,
): Promise<void> {
  const own = connection ?? (await openConnection(config, log, 'stagecoach-check'));
  let amqpName: string | undefined;
  let node: string | undefined;
  try {
    amqpName = own.connection.serverProperties.cluster_name;
    node = nodeOf(own)?.label;
  } finally {
    if (connection === undefined) await own.close().catch(() => undefined);
  }
  if (amqpName === undefined) return; // a broker that does not say (not RabbitMQ): nothing to compare
  const managementName = await api.clusterName();
  if (managementName === amqpName) return;
  throw new ConfigError(
    config.source,
    'broker.management',
    `a management API of the broker the AMQP URLs name: ${api.shown} belongs to cluster "${managementName}", ` +
      `the AMQP node${node === undefined ? '' : ` ${node}`} to cluster "${amqpName}"; stagecoach does not read one broker and change another ` +
      '(set broker.management, or STAGECOACH_MANAGEMENT_URL, to a node of the same cluster, or leave it out: ' +
      "then each AMQP node's own management port is used)",
  );
}
