import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { declareTopology, unbind } from '../broker/declare-topology.js';
import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import type { ControlCommand } from '../control/control-protocol.js';
import { publishControl } from '../control/send-control.js';
import { StagecoachError, TenantError } from '../errors/errors.js';
import { BrokerFlags } from '../flags/broker-flags.js';
import type { Logger } from '../logging/logger.js';
import { coreTopology, provisionedQueueTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import type { Topology } from '../topology/topology.types.js';
import { StateProbe } from './state-probe.js';
import { stateFlag, type QueueState, type QueueStateTarget } from './queue-state.js';

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
 * The state flags are the truth (queue-state.ts); the control message only makes running stages
 * look now rather than at their next connection. In order, so that a crash half-way leaves a
 * state that a second run completes:
 * - `paused`: set the pause flags; if it was draining, clear that flag and bind the entry again.
 * - `draining`: set the drain flag, clear the pause flags, then unbind the entry (new jobs land in
 *   `unroutable`, kept and replayable). Stages declaring concurrently check the flag after
 *   binding (declare-topology.ts), so none reopens the entry.
 * - `active`: clear the pause flags, and without a variant the drain flag, then bind the entry.
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
  const physical = physicalVariants(queue, variant);
  const pauseFlags = physical.map((v) => stateFlag('paused', { queue: queue.name, tenant, variant: v }));
  const drainFlag = stateFlag('draining', { queue: queue.name, tenant });
  const topology = provisionedQueueTopology(config, queue, tenant);
  const flags = new BrokerFlags(connection, config);
  try {
    if (state === 'draining') {
      await flags.set(drainFlag);
      for (const flag of pauseFlags) await flags.clear(flag);
      // Its queues exist (declared without the entry, the flag being set), then the entry goes.
      await declareTopology(connection, topology, log);
      await cutEntries(connection, topology.bindings);
      return;
    }
    if (state === 'paused') for (const flag of pauseFlags) await flags.set(flag);
    else for (const flag of pauseFlags) await flags.clear(flag);
    // Pausing or resuming the whole queue ends a drain; a variant alone does not.
    if (variant === undefined) {
      await flags.clear(drainFlag);
      // Binding again is declaring: idempotent, and it skips the entry while a drain flag stays.
      await declareTopology(connection, topology, log);
    }
  } finally {
    await flags.close();
  }
}

/** Unbinds the entries among `bindings` (those a drain flag closes): new jobs land in `unroutable`. */
async function cutEntries(connection: AmqpConnection, bindings: Topology['bindings']): Promise<void> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  try {
    for (const binding of bindings) if (binding.drainMarker !== undefined) await unbind(channel, binding);
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
  const flags = new BrokerFlags(connection, config);
  try {
    if (await flags.isSet({ kind: 'tenant-provisioned', tenant })) return;
  } finally {
    await flags.close();
  }
  throw new TenantError(
    tenant,
    `tenant "${tenant}" is neither configured nor provisioned: run \`stagecoach provision --tenant ${tenant}\` first`,
  );
}
