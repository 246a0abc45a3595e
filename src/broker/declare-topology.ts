import type { Channel } from 'amqplib';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import type { BindingSpec, Topology } from '../topology/topology.types.js';
import { openConnection, type AmqpConnection } from './amqp-connection.js';
import { ExchangeProbe } from './exchange-probe.js';

/**
 * Declares `topology` (assert exchanges, assert queues, bind) on an open connection, through a
 * channel of its own that is closed afterwards. Declaring is idempotent, so every stage instance
 * does it at start-up and whenever it heals a channel, in any order. Nothing else shares the
 * channel: a declaration the broker refuses (a queue that exists with other arguments, a
 * missing permission) closes this channel only, and the error names what was refused.
 */
export async function declareTopology(connection: AmqpConnection, topology: Topology, log?: Logger): Promise<void> {
  const channel = await connection.createChannel();
  // The refusal arrives as the rejection of the operation below; the event must not crash.
  channel.on('error', () => undefined);
  const markers = new ExchangeProbe(connection);
  try {
    for (const exchange of topology.exchanges) {
      await declaring(`exchange "${exchange.name}"`, () =>
        channel.assertExchange(exchange.name, exchange.type, {
          durable: exchange.durable,
          ...(exchange.alternateExchange === undefined ? {} : { alternateExchange: exchange.alternateExchange }),
        }),
      );
    }
    for (const queue of topology.queues) {
      await declaring(`queue "${queue.name}"`, () =>
        channel.assertQueue(queue.name, { durable: queue.durable, arguments: queue.arguments }),
      );
    }
    for (const binding of topology.bindings) {
      const what = `binding ${binding.source} -> ${binding.destination}`;
      const args = binding.arguments ?? {};
      // A draining queue's entry stays cut (see BindingSpec.drainMarker).
      if (binding.drainMarker !== undefined && (await markers.exists(binding.drainMarker))) continue;
      await declaring(what, () =>
        binding.destinationType === 'queue'
          ? channel.bindQueue(binding.destination, binding.source, binding.routingKey, args)
          : channel.bindExchange(binding.destination, binding.source, binding.routingKey, args),
      );
      // `drain` puts its marker, then unbinds. Had it done both between the check above and the
      // bind, the bind would reopen the entry: checking again after binding closes that window
      // (either this check sees the marker, or the drain's unbind came after this bind).
      if (binding.drainMarker !== undefined && (await markers.exists(binding.drainMarker))) {
        await declaring(`un${what}`, () => unbind(channel, binding));
      }
    }
  } finally {
    await close(channel);
    await markers.close();
  }
  log?.debug('topology declared', {
    exchanges: topology.exchanges.length,
    queues: topology.queues.length,
    bindings: topology.bindings.length,
  });
}

/**
 * Checks that `topology`'s exchanges and queues exist (passive declares, which need no
 * permission), through a channel of its own. For processes that must not declare: with
 * `security.tenantUsers` a tenant or internal user has no configure permission, and the
 * operator's `provision` declared everything. Bindings cannot be checked passively.
 * @throws StagecoachError NOT_FOUND naming the first missing exchange or queue.
 */
export async function checkTopology(connection: AmqpConnection, topology: Topology, log?: Logger): Promise<void> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  const missing = (what: string, err: unknown): StagecoachError =>
    new StagecoachError(
      'NOT_FOUND',
      `${what} is missing on the broker (${(err as Error).message}); with security.tenantUsers stages do not declare: run \`stagecoach provision\``,
      { cause: err },
    );
  try {
    for (const exchange of topology.exchanges) {
      await channel.checkExchange(exchange.name).catch((err: unknown) => Promise.reject(missing(`exchange "${exchange.name}"`, err)));
    }
    for (const queue of topology.queues) {
      await channel.checkQueue(queue.name).catch((err: unknown) => Promise.reject(missing(`queue "${queue.name}"`, err)));
    }
  } finally {
    await close(channel);
  }
  log?.debug('topology checked', { exchanges: topology.exchanges.length, queues: topology.queues.length });
}

/**
 * What a long-running process does with the topology it needs, at start-up and when it heals:
 * declares it, or with `security.tenantUsers` checks that it exists (see `checkTopology`).
 */
export function ensureTopology(connection: AmqpConnection, config: CompiledConfig, topology: Topology, log?: Logger): Promise<void> {
  return config.security.tenantUsers ? checkTopology(connection, topology, log) : declareTopology(connection, topology, log);
}

/** For one-off commands (provision, control, tests): connects, declares `topology`, disconnects. */
export async function declareTopologyOnce(config: CompiledConfig, topology: Topology, log: Logger): Promise<void> {
  const connection = await openConnection(config, log, 'stagecoach-declare');
  try {
    await declareTopology(connection, topology, log);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Removes one binding of a topology (a queue's or an exchange's). */
export async function unbind(channel: Channel, binding: BindingSpec): Promise<void> {
  const args = binding.arguments ?? {};
  if (binding.destinationType === 'queue') await channel.unbindQueue(binding.destination, binding.source, binding.routingKey, args);
  else await channel.unbindExchange(binding.destination, binding.source, binding.routingKey, args);
}

async function declaring(what: string, action: () => Promise<unknown>): Promise<void> {
  try {
    await action();
  } catch (err) {
    const message = (err as Error).message;
    // 406: the object exists with other properties, which are fixed once declared (a queue
    // declared by an older configuration, with max_size still an argument, or another
    // max_priority): say what to do rather than only what the broker said.
    const hint = /PRECONDITION_FAILED - inequivalent/.test(message)
      ? '; it exists with other properties, which the broker never changes: `stagecoach plan` lists what needs recreating'
      : '';
    throw new StagecoachError('TOPOLOGY_CONFLICT', `the broker refused ${what}: ${message}${hint}`, { cause: err });
  }
}

async function close(channel: Channel): Promise<void> {
  try {
    await channel.close();
  } catch {
    // Already closed by a refused declaration: the error above says why.
  }
}
