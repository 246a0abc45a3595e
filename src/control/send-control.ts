import { openConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { declareTopologyOnce } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import type { ControlMessage } from './control-protocol.js';
import { coreTopology, mergeTopologies, queueTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';

/**
 * Sends a control message to every running stage (fanout `<prefix>.control`).
 *
 * Queue states are also enforced at the broker where running stages alone cannot: `drain`
 * unbinds the queue from its entry exchange, so new jobs for it go to `unroutable` (kept, and
 * replayable) while the stages empty it; `resume` declares the bindings again.
 */
export async function sendControl(config: CompiledConfig, message: ControlMessage, log: Logger): Promise<void> {
  await declareTopologyOnce(config, coreTopology(config), log);
  if (message.queue !== undefined) {
    const queue = queueFor(config, message.queue);
    const tenants = queue.scope === 'shared' ? [undefined] : message.tenant === undefined ? config.tenants : [message.tenant];
    if (queue.scope === 'shared' && message.tenant !== undefined) {
      throw new StagecoachError('INVALID_REQUEST', `queue "${message.queue}" is shared: it has no per-tenant state, drop --tenant`);
    }
    if (message.command === 'drain') await unbindEntries(config, message.queue, tenants, log);
    if (message.command === 'resume') {
      const topology = mergeTopologies(coreTopology(config), ...tenants.map((tenant) => queueTopology(config, queue, tenant)));
      await declareTopologyOnce(config, topology, log);
    }
  }
  const names = new BrokerNames(config.prefix);
  const connection = await openConnection(config, log, 'stagecoach-control');
  try {
    const publisher = await ConfirmPublisher.open(connection);
    await publisher.publish(names.control, '', Buffer.from(JSON.stringify(message)), { contentType: 'application/json' });
    await publisher.close();
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Removes the binding through which new jobs reach the queue (its entry), for each tenant. */
async function unbindEntries(config: CompiledConfig, queueName: string, tenants: Array<string | undefined>, log: Logger): Promise<void> {
  const names = new BrokerNames(config.prefix);
  const queue = queueFor(config, queueName);
  const connection = await openConnection(config, log, 'stagecoach-control');
  try {
    const channel = await connection.createChannel();
    for (const tenant of tenants) {
      if (tenant === undefined) {
        await channel.unbindQueue(names.queue(queueName), names.direct, queueName);
      } else if (queue.variants) {
        await channel.unbindExchange(names.variantExchange(queueName, tenant), names.tenantExchange(tenant), queueName);
      } else {
        await channel.unbindQueue(names.queue(queueName, tenant), names.tenantExchange(tenant), queueName);
      }
    }
    await channel.close();
  } finally {
    await connection.close().catch(() => undefined);
  }
}
