import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { declareTopology, unbind } from '../broker/declare-topology.js';
import { exchangeExists } from '../broker/exchange-exists.js';
import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import type { ControlCommand } from '../control/control-protocol.js';
import { publishControl } from '../control/send-control.js';
import { StagecoachError, TenantError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { coreTopology, provisionedQueueTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import { StateProbe } from './state-probe.js';
import type { QueueState, QueueStateTarget } from './queue-state.js';

/** A physical queue and the state it is in after `setQueueState`. */
export interface PhysicalQueueState {
  queue: string;
  tenant?: string;
  variant?: string;
  physicalQueue: string;
  state: QueueState;
}

const COMMAND: Record<QueueState, ControlCommand> = { active: 'resume', paused: 'pause', draining: 'drain' };

/**
 * Puts a logical queue (of one tenant, of every configured tenant when `tenant` is absent, or
 * shared) into `state`, on the broker, then tells running stages to read it again.
 *
 * The marker exchanges are the truth (queue-state.ts); the control message only makes running
 * stages look now rather than at their next connection. In order, so that a crash half-way
 * leaves a state that a second run completes:
 * - `paused`: put the pause markers; if it was draining, drop that marker and bind the entry again.
 * - `draining`: put the drain marker, drop pause markers, then unbind the entry (new jobs land in
 *   `unroutable`, kept and replayable). Stages declaring concurrently check the marker after
 *   binding (declare-topology.ts), so none reopens the entry.
 * - `active`: drop the pause markers, and without a variant the drain marker, then bind the entry.
 * With `variant`, only that variant queue's pause changes: a drain is the whole logical queue's.
 *
 * @throws StagecoachError INVALID_REQUEST for a tenant on a shared queue, an unknown variant, or
 * a drain of one variant; TenantError for a tenant neither configured nor provisioned.
 */
export async function setQueueState(
  config: CompiledConfig,
  target: QueueStateTarget,
  state: QueueState,
  log: Logger,
): Promise<PhysicalQueueState[]> {
  const queue = queueFor(config, target.queue);
  const variants = Object.keys(queue.variants?.values ?? {});
  if (queue.scope === 'shared' && target.tenant !== undefined) {
    throw new StagecoachError('INVALID_REQUEST', `queue "${queue.name}" is shared: it has one state for every tenant, drop --tenant`);
  }
  if (target.variant !== undefined && !variants.includes(target.variant)) {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `queue "${queue.name}" has no variant "${target.variant}" (known: ${variants.join(', ') || 'none'})`,
    );
  }
  if (target.variant !== undefined && state === 'draining') {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `a drain stops the whole queue "${queue.name}" of a tenant, variants included (they share its entry): drop --variant`,
    );
  }
  const tenants = queue.scope === 'shared' ? [undefined] : target.tenant === undefined ? config.tenants : [target.tenant];
  const connection = await openConnection(config, log, 'stagecoach-state');
  try {
    await declareTopology(connection, coreTopology(config), log);
    const results: PhysicalQueueState[] = [];
    for (const tenant of tenants) {
      if (tenant !== undefined) await checkKnownTenant(config, connection, tenant);
      await setOne(config, connection, queue, tenant, target.variant, state, log);
      results.push(...(await readBack(config, connection, queue, tenant, target.variant)));
    }
    await publishControl(connection, config, {
      command: COMMAND[state],
      queue: queue.name,
      ...(target.tenant === undefined ? {} : { tenant: target.tenant }),
    });
    return results;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

async function setOne(
  config: CompiledConfig,
  connection: AmqpConnection,
  queue: ResolvedQueueConfig,
  tenant: string | undefined,
  variant: string | undefined,
  state: QueueState,
  log: Logger,
): Promise<void> {
  const names = new BrokerNames(config.prefix);
  const physical = physicalVariants(queue, variant);
  const pauseMarkers = physical.map((v) => names.stateMarker('paused', queue.name, tenant, v));
  const drainMarker = names.stateMarker('draining', queue.name, tenant);
  const topology = provisionedQueueTopology(config, queue, tenant);
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  try {
    const mark = (name: string): Promise<unknown> => channel.assertExchange(name, 'fanout', { durable: config.durable });
    if (state === 'draining') {
      await mark(drainMarker);
      for (const marker of pauseMarkers) await channel.deleteExchange(marker);
      // Its queues exist (declared without the entry, the marker being there), then the entry goes.
      await declareTopology(connection, topology, log);
      for (const binding of topology.bindings) if (binding.drainMarker !== undefined) await unbind(channel, binding);
      return;
    }
    if (state === 'paused') for (const marker of pauseMarkers) await mark(marker);
    else for (const marker of pauseMarkers) await channel.deleteExchange(marker);
    // Pausing or resuming the whole queue ends a drain; a variant alone does not.
    if (variant === undefined) {
      await channel.deleteExchange(drainMarker);
      // Binding again is declaring: idempotent, and it skips the entry while a drain marker stays.
      await declareTopology(connection, topology, log);
    }
  } finally {
    await channel.close().catch(() => undefined);
  }
}

/** Every physical queue of the target with the state a stage now reads for it. */
async function readBack(
  config: CompiledConfig,
  connection: AmqpConnection,
  queue: ResolvedQueueConfig,
  tenant: string | undefined,
  variant: string | undefined,
): Promise<PhysicalQueueState[]> {
  const names = new BrokerNames(config.prefix);
  const physical = physicalVariants(queue, variant);
  const probe = new StateProbe(connection, config.prefix);
  try {
    const results: PhysicalQueueState[] = [];
    for (const v of physical) {
      const target = { queue: queue.name, ...(tenant === undefined ? {} : { tenant }), ...(v === undefined ? {} : { variant: v }) };
      results.push({ ...target, physicalQueue: names.queue(queue.name, tenant, v), state: await probe.stateOf(target) });
    }
    return results;
  } finally {
    await probe.close();
  }
}

/** The physical queues of a target, by variant: the one given, or the general queue (undefined) and every variant. */
function physicalVariants(queue: ResolvedQueueConfig, variant: string | undefined): Array<string | undefined> {
  return variant !== undefined ? [variant] : [undefined, ...Object.keys(queue.variants?.values ?? {})];
}

/** A state for a tenant nobody provisioned would name queues nobody declared. */
export async function checkKnownTenant(config: CompiledConfig, connection: AmqpConnection, tenant: string): Promise<void> {
  if (config.tenants.includes(tenant)) return;
  if (await exchangeExists(connection, new BrokerNames(config.prefix).tenantExchange(tenant))) return;
  throw new TenantError(
    tenant,
    `tenant "${tenant}" is neither configured nor provisioned: run \`stagecoach provision --tenant ${tenant}\` first`,
  );
}
