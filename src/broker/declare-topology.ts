import rascal from 'rascal';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { Topology } from '../topology/topology.types.js';
import { withHeartbeat } from './amqp-connection.js';

const VHOST = '/';

/**
 * The rascal vhost configuration that declares exactly `topology`. Keys are the broker names
 * themselves; rascal's own defaults (topic exchanges, `#` binding keys) never apply because
 * every field is set.
 */
export function toRascalConfig(config: CompiledConfig, topology: Topology): object {
  const exchanges: Record<string, object> = {};
  for (const exchange of topology.exchanges) {
    exchanges[exchange.name] = {
      assert: true,
      type: exchange.type,
      options: {
        durable: exchange.durable,
        ...(exchange.alternateExchange === undefined ? {} : { alternateExchange: exchange.alternateExchange }),
      },
    };
  }
  const queues: Record<string, object> = {};
  for (const queue of topology.queues) {
    queues[queue.name] = { assert: true, options: { durable: queue.durable, arguments: queue.arguments } };
  }
  const bindings: Record<string, object> = {};
  topology.bindings.forEach((binding, index) => {
    bindings[`b${index}`] = {
      source: binding.source,
      destination: binding.destination,
      destinationType: binding.destinationType,
      bindingKey: binding.routingKey,
      options: binding.arguments ?? {},
    };
  });
  return {
    vhosts: {
      [VHOST]: {
        connection: { url: withHeartbeat(config.broker.url, config.broker.heartbeat) },
        exchanges,
        queues,
        bindings,
      },
    },
  };
}

/**
 * Declares `topology` through rascal (assert exchanges, assert queues, bind), then lets the
 * rascal connection go: stagecoach consumes and publishes on its own channels. Declaring is
 * idempotent, so every stage instance does it at start-up, in any order.
 */
export async function declareTopology(config: CompiledConfig, topology: Topology, log: Logger): Promise<void> {
  const broker = await rascal.BrokerAsPromised.create(toRascalConfig(config, topology));
  broker.on('error', (err: Error) => log.warn('rascal error while declaring topology', { err: err.message }));
  await broker.shutdown();
  log.debug('topology declared', {
    exchanges: topology.exchanges.length,
    queues: topology.queues.length,
    bindings: topology.bindings.length,
  });
}
