import type { Channel } from 'amqplib';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { FlagChannel } from '../flags/flag-channel.js';
import type { FlagReader } from '../flags/flag-reader.js';
import type { Logger } from '../logging/logger.js';
import type { BindingSpec, Topology } from '../topology/topology.types.js';
import { inParallel } from '../util/in-parallel.js';
import { openConnection, type AmqpConnection } from './amqp-connection.js';

/** How `declareTopology` works; every field optional. */
export interface DeclareOptions {
  /**
   * Channels declaring at once. Declarations are round trips, so one channel leaves the broker
   * idle between them: `provision` of thousands of tenants uses several. Each lane is a channel
   * of the connection for the duration of the call. @defaultValue 1
   */
  lanes?: number;
  /**
   * Where drain markers are read. @defaultValue passive declares on `connection`
   * ({@link FlagChannel}), which need no permission
   */
  drainMarkers?: FlagReader;
}

/**
 * Lanes of one-off declarations at scale (`provision`, `declareTopologyOnce`): the broker, not
 * the client, is then the limit (docs/performance.md has the measurements). Far below the 2,047
 * channels a connection may have, and the connection is the command's own.
 */
export const PROVISION_LANES = 64;

/** Fewest declarations that justify a lane of their own (a small topology stays on one channel). */
const DECLARATIONS_PER_LANE = 16;

/**
 * Declares `topology` (assert exchanges and queues, then bind) on an open connection, through
 * channels of its own that are closed afterwards. Declaring is idempotent, so every stage
 * instance does it at start-up and whenever it heals a channel, in any order. Nothing else
 * shares those channels: a declaration the broker refuses (a queue that exists with other
 * arguments, a missing permission) closes its channel only, and the error names what was refused.
 *
 * With `lanes` > 1 the declarations run on several channels at once, in two steps: every
 * exchange and queue, then every binding, so each binding finds its source and destination
 * declared whichever lane took them. The first refusal stops every lane and is thrown.
 *
 * Drain markers: a binding with `drainMarker` (a queue's entry) is skipped while its marker
 * exists, and every entry bound is checked again after binding (see below).
 */
export async function declareTopology(
  connection: AmqpConnection,
  topology: Topology,
  log?: Logger,
  options: DeclareOptions = {},
): Promise<void> {
  const most = Math.max(1, Math.floor(options.lanes ?? 1));
  // A lane costs a channel opened and closed: worth it only with declarations enough to share.
  const lanes = (count: number): number => Math.max(1, Math.min(most, Math.ceil(count / DECLARATIONS_PER_LANE)));
  const markers = options.drainMarkers ?? new FlagChannel(connection);
  const channels = new LaneChannels(connection);
  try {
    const objects: Array<(channel: Channel) => Promise<void>> = [
      ...topology.exchanges.map(
        (exchange) => (channel: Channel) =>
          declaring(`exchange "${exchange.name}"`, () =>
            channel.assertExchange(exchange.name, exchange.type, {
              durable: exchange.durable,
              ...(exchange.alternateExchange === undefined ? {} : { alternateExchange: exchange.alternateExchange }),
            }),
          ),
      ),
      ...topology.queues.map(
        (queue) => (channel: Channel) =>
          declaring(`queue "${queue.name}"`, () => channel.assertQueue(queue.name, { durable: queue.durable, arguments: queue.arguments })),
      ),
    ];
    await inParallel(objects, lanes(objects.length), async (declare, lane) => declare(await channels.of(lane)));

    // A draining queue's entry stays cut (see BindingSpec.drainMarker).
    const entries = topology.bindings.filter((binding) => binding.drainMarker !== undefined);
    const closed = await markers.present(uniqueMarkers(entries));
    const bound = topology.bindings.filter((binding) => binding.drainMarker === undefined || !closed.has(binding.drainMarker));
    await inParallel(bound, lanes(bound.length), async (binding, lane) => {
      const channel = await channels.of(lane);
      await declaring(describe(binding), () => bind(channel, binding));
    });
    // `drain` puts its marker, then unbinds. Had it done both between the first look and the
    // bind, the bind would reopen the entry: looking again after binding closes that window
    // (either the second look sees the marker, or the drain's unbind came after this bind).
    // The second look starts only once every bind has completed, so it is after each of them.
    const boundEntries = bound.filter((binding) => binding.drainMarker !== undefined);
    const reclosed = await markers.present(uniqueMarkers(boundEntries));
    const reopened = boundEntries.filter((binding) => reclosed.has(binding.drainMarker as string));
    await inParallel(reopened, lanes(reopened.length), async (binding, lane) => {
      const channel = await channels.of(lane);
      await declaring(`un${describe(binding)}`, () => unbind(channel, binding));
    });
  } finally {
    await channels.close();
    await markers.close();
  }
  log?.debug('topology declared', {
    exchanges: topology.exchanges.length,
    queues: topology.queues.length,
    bindings: topology.bindings.length,
    lanes: most,
  });
}

/** One channel per lane, opened when the lane first needs it, and again after a refusal closed it. */
class LaneChannels {
  private readonly channels = new Map<number, Channel>();

  constructor(private readonly connection: AmqpConnection) {}

  async of(lane: number): Promise<Channel> {
    const open = this.channels.get(lane);
    if (open !== undefined) return open;
    const channel = await this.connection.createChannel();
    // The refusal arrives as the rejection of the operation; the event must not crash.
    channel.on('error', () => undefined);
    channel.on('close', () => {
      if (this.channels.get(lane) === channel) this.channels.delete(lane);
    });
    this.channels.set(lane, channel);
    return channel;
  }

  async close(): Promise<void> {
    const channels = [...this.channels.values()];
    this.channels.clear();
    await Promise.all(channels.map(close));
  }
}

function uniqueMarkers(bindings: readonly BindingSpec[]): string[] {
  return [...new Set(bindings.map((binding) => binding.drainMarker as string))];
}

function describe(binding: BindingSpec): string {
  return `binding ${binding.source} -> ${binding.destination}`;
}

/** Adds one binding of a topology (a queue's or an exchange's). */
async function bind(channel: Channel, binding: BindingSpec): Promise<void> {
  const args = binding.arguments ?? {};
  if (binding.destinationType === 'queue') await channel.bindQueue(binding.destination, binding.source, binding.routingKey, args);
  else await channel.bindExchange(binding.destination, binding.source, binding.routingKey, args);
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

/**
 * For one-off commands (control, tests, benchmarks): connects, declares `topology` on
 * {@link PROVISION_LANES} channels (the connection is its own, so they take no stage's), disconnects.
 */
export async function declareTopologyOnce(config: CompiledConfig, topology: Topology, log: Logger): Promise<void> {
  const connection = await openConnection(config, log, 'stagecoach-declare');
  try {
    await declareTopology(connection, topology, log, { lanes: PROVISION_LANES });
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
