import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { delayDeliveryBinding, delayTopology } from './delay-topology.js';
import { BrokerNames } from './names.js';
import { queueTypeArguments, sharedQueueType } from './queue-type.js';
import type { BindingSpec, QueueSpec, StageEndpoints, Topology } from './topology.types.js';
import {
  jobCancelsExchange,
  jobCancelsStream,
  schedulesExchange,
  schedulesStream,
  trackingExchange,
  trackingStream,
} from './stream-topology.js';
import { mergeTopologies, suspectPart } from './topology-parts.js';

export {
  jobCancelsExchange,
  jobCancelsStream,
  SCHEDULES_STREAM_BYTES,
  schedulesExchange,
  schedulesStream,
  trackingExchange,
  trackingStream,
} from './stream-topology.js';
export { mergeTopologies, suspectPart, withoutSuspectPart } from './topology-parts.js';

/**
 * Pure functions from configuration to the exact exchanges, queues and bindings on the broker.
 *
 * Routing of a tenant-scoped job published to `root` with routing key = logical queue:
 *
 *   root (headers, x-match all-with-x on the tenant header)  --AE-->  unroutable
 *     -> tenant.<t> (direct, key = queue)                    --AE-->  unroutable
 *          -> queue.<q>.<t>                                   (queue without variants)
 *          -> variants.<q>.<t> (headers, variant header)     --AE-->  general.<q>.<t> (fanout)
 *               -> queue.<q>.<t>.<variant>                            -> queue.<q>.<t>
 *
 * Retries come back through the delay ladder (delay-topology.ts), not to the physical queue they
 * left but to its `due` companion (variant queues included), which `delay.deliver` binds.
 *
 * Who declares what: `provision` declares what must exist before any stage runs, so that no job
 * published meanwhile is lost or parked in `unroutable`: the entry, every work queue, its `due`
 * companion (a producer's scheduled job comes back there through the ladder) and its dead
 * letters (the broker dead-letters expired jobs with no stage running). The `suspect` companion
 * is only ever written by the stage that reads the queue, after a crash, so that stage declares it
 * at start-up (stageTopology) and `provision` leaves it out, a quarter of its queues: queue
 * creation is what bounds `provision` of many tenants (docs/performance.md). A pooled process
 * following the broker (`run --all-tenants`) declares a provisioned tenant's suspect part only
 * before it first moves a job there (SuspectDeclaration): most tenants never have one. With
 * `security.tenantUsers` stages cannot declare, so `provision` declares the suspects too.
 *
 * The alternate exchange of the variant router makes "the matching variant queue, or else the
 * general queue" a broker rule: each job reaches exactly one queue. `all-with-x` makes the
 * broker compare `x-` headers too; with plain `all` an `x-ojs-tenant` binding matches every job.
 */

export function emptyTopology(): Topology {
  return { exchanges: [], queues: [], bindings: [] };
}

/** Built once per configuration: every stage runner's topology holds it (see {@link coreTopology}). */
const cores = new WeakMap<CompiledConfig, Topology>();

/**
 * Exchanges and queues every process needs, whatever its stage: entry points, dead letters, the
 * delay ladder. One object per configuration, frozen: every runner's topology holds these hundred
 * specs, and a pooled process built them once per tenant (a quarter of its heap at 2,000 tenants).
 */
export function coreTopology(config: CompiledConfig): Topology {
  let core = cores.get(config);
  if (core === undefined) {
    const built = mergeTopologies(entryTopology(config), delayTopology(config));
    core = Object.freeze({
      exchanges: Object.freeze(built.exchanges.map((spec) => Object.freeze(spec))),
      queues: Object.freeze(built.queues.map((spec) => Object.freeze(spec))),
      bindings: Object.freeze(built.bindings.map((spec) => Object.freeze(spec))),
    }) as Topology;
    cores.set(config, core);
  }
  return core;
}

function entryTopology(config: CompiledConfig): Topology {
  const names = new BrokerNames(config.prefix);
  const durable = config.durable;
  return {
    exchanges: [
      { name: names.unroutable, type: 'fanout', durable },
      { name: names.root, type: 'headers', durable, alternateExchange: names.unroutable },
      { name: names.direct, type: 'direct', durable, alternateExchange: names.unroutable },
      { name: names.dlx, type: 'direct', durable },
      { name: names.control, type: 'fanout', durable },
      { name: names.events, type: 'topic', durable },
      // Parked jobs of paused batches and tenants; where no parked queue is bound, kept in unroutable.
      { name: names.park, type: 'topic', durable, alternateExchange: names.unroutable },
      trackingExchange(config),
      jobCancelsExchange(config),
      schedulesExchange(config),
    ],
    queues: [
      { name: names.unroutable, durable, arguments: queueTypeArguments(sharedQueueType(config)) },
      { name: names.parked, durable, arguments: queueTypeArguments(sharedQueueType(config)) },
      trackingStream(config),
      jobCancelsStream(config),
      schedulesStream(config),
    ],
    bindings: [
      { source: names.unroutable, destination: names.unroutable, destinationType: 'queue', routingKey: '' },
      // Every tenant's parked jobs in one queue: `resume` picks its own out (batch-directives.ts).
      { source: names.park, destination: names.parked, destinationType: 'queue', routingKey: '#' },
      { source: names.tracking, destination: names.tracking, destinationType: 'queue', routingKey: '' },
      { source: names.jobCancels, destination: names.jobCancels, destinationType: 'queue', routingKey: '' },
      { source: names.schedules, destination: names.schedules, destinationType: 'queue', routingKey: '' },
    ],
  };
}

/** The tenant's exchange and its binding from the root exchange. */
export function tenantTopology(config: CompiledConfig, tenant: string): Topology {
  const names = new BrokerNames(config.prefix);
  const exchange = names.tenantExchange(tenant);
  return {
    exchanges: [{ name: exchange, type: 'direct', durable: config.durable, alternateExchange: names.unroutable }],
    queues: [],
    bindings: [
      {
        source: names.root,
        destination: exchange,
        destinationType: 'exchange',
        routingKey: '',
        arguments: { 'x-match': 'all-with-x', [config.tenantHeader]: tenant },
      },
    ],
  };
}

/** Which companions of each physical queue a topology holds (see the header: who declares what). */
export interface CompanionOptions {
  /** The `suspect` companions and their bindings from the delay ladder. @defaultValue true */
  suspects?: boolean;
}

/**
 * One logical queue, for one tenant (tenant scope) or for all (shared scope): the physical
 * queue(s), their dead-letter queue and every binding on the way from the entry exchange.
 * The whole variant chain is declared together, so routing does not depend on which stage
 * instance starts first.
 */
export function queueTopology(
  config: CompiledConfig,
  queue: ResolvedQueueConfig,
  tenant?: string,
  options: CompanionOptions = {},
): Topology {
  const names = new BrokerNames(config.prefix);
  const durable = config.durable;
  const suspects = options.suspects ?? true;
  if (queue.scope === 'shared') {
    const physical = names.queue(queue.name);
    const dead = names.deadQueue(queue.name);
    return {
      exchanges: [],
      queues: [...workQueues(config, queue, names, dead, suspects), { name: dead, durable, arguments: queueTypeArguments(queue.type) }],
      bindings: [
        {
          source: names.direct,
          destination: physical,
          destinationType: 'queue',
          routingKey: queue.name,
          drainMarker: names.stateMarker('draining', queue.name),
        },
        ...returnBindings(config, names, suspects, queue.name),
        { source: names.dlx, destination: dead, destinationType: 'queue', routingKey: dead },
      ],
    };
  }
  if (tenant === undefined) throw new Error(`queue "${queue.name}" is tenant-scoped: a tenant is required`);

  const topology = tenantTopology(config, tenant);
  const tenantExchange = names.tenantExchange(tenant);
  const general = names.queue(queue.name, tenant);
  const dead = names.deadQueue(queue.name, tenant);
  topology.queues.push(...workQueues(config, queue, names, dead, suspects, tenant), {
    name: dead,
    durable,
    arguments: queueTypeArguments(queue.type),
  });
  topology.bindings.push(...returnBindings(config, names, suspects, queue.name, tenant), {
    source: names.dlx,
    destination: dead,
    destinationType: 'queue',
    routingKey: dead,
  });

  if (!queue.variants) {
    topology.bindings.push({
      source: tenantExchange,
      destination: general,
      destinationType: 'queue',
      routingKey: queue.name,
      drainMarker: names.stateMarker('draining', queue.name, tenant),
    });
    return topology;
  }
  const router = names.variantExchange(queue.name, tenant);
  const fallback = names.generalExchange(queue.name, tenant);
  topology.exchanges.push(
    { name: fallback, type: 'fanout', durable },
    { name: router, type: 'headers', durable, alternateExchange: fallback },
  );
  topology.bindings.push(
    {
      source: tenantExchange,
      destination: router,
      destinationType: 'exchange',
      routingKey: queue.name,
      drainMarker: names.stateMarker('draining', queue.name, tenant),
    },
    { source: fallback, destination: general, destinationType: 'queue', routingKey: '' },
  );
  for (const [variant, values] of Object.entries(queue.variants.values)) {
    const physical = names.queue(queue.name, tenant, variant);
    topology.queues.push(...workQueues(config, queue, names, dead, suspects, tenant, variant));
    topology.bindings.push(...returnBindings(config, names, suspects, queue.name, tenant, variant));
    for (const value of values) {
      topology.bindings.push({
        source: router,
        destination: physical,
        destinationType: 'queue',
        routingKey: '',
        arguments: { 'x-match': 'all-with-x', [queue.variants.by]: value },
      });
    }
  }
  return topology;
}

/** What `stagecoach run <stage> --tenant T` declares: the core and its input's chain. */
export function stageTopology(config: CompiledConfig, stage: StageEndpoints, tenant?: string): Topology {
  for (const output of stage.outputs) queueFor(config, output, `stage "${stage.name}"`);
  const input = queueFor(config, stage.input, `stage "${stage.name}"`);
  return mergeTopologies(coreTopology(config), queueTopology(config, input, input.scope === 'tenant' ? tenant : undefined));
}

/**
 * What `stagecoach provision` declares: the core, every configured queue and every queue the
 * given stages read or write, for one tenant or for all configured tenants. Without the
 * `suspect` companions, which the stages declare themselves ({@link stageDeclaredTopology}),
 * unless `security.tenantUsers` keeps stages from declaring.
 */
export function provisionTopology(config: CompiledConfig, stages: readonly StageEndpoints[], tenant?: string): Topology {
  const tenants = tenant === undefined ? config.tenants : [tenant];
  const parts = [coreTopology(config), ...tenants.map((t) => tenantTopology(config, t))];
  for (const queue of provisionQueues(config, stages)) {
    if (queue.scope === 'shared') parts.push(provisionedQueueTopology(config, queue));
    else for (const t of tenants) parts.push(provisionedQueueTopology(config, queue, t));
  }
  return mergeTopologies(...parts);
}

/**
 * What `provision` declares of one logical queue (see {@link provisionTopology}): also what the
 * operator's other commands that make a queue exist declare (queue states, the admin API), so
 * that none of them leaves a set `provision` would not.
 */
export function provisionedQueueTopology(config: CompiledConfig, queue: ResolvedQueueConfig, tenant?: string): Topology {
  return queueTopology(config, queue, tenant, { suspects: config.security.tenantUsers });
}

/**
 * What the stages of the queues `provision` covers declare for themselves when they start, and
 * `provision` leaves to them: the `suspect` companions and their bindings from the delay ladder.
 * Empty with `security.tenantUsers`, where `provision` declares them. `plan` neither adds nor
 * retires these; tests and teardown take them with {@link provisionTopology}.
 */
export function stageDeclaredTopology(config: CompiledConfig, stages: readonly StageEndpoints[], tenant?: string): Topology {
  if (config.security.tenantUsers) return emptyTopology();
  const tenants = tenant === undefined ? config.tenants : [tenant];
  // Taken from the stage's own topology rather than built again, so the two never differ; each
  // part filtered before the merge, which then dedups the suspects alone (at 10,000 tenants the
  // merge of every part was a second of `plan`).
  const parts: Topology[] = [];
  for (const queue of provisionQueues(config, stages)) {
    for (const t of queue.scope === 'shared' ? [undefined] : tenants) parts.push(suspectPart(config, queueTopology(config, queue, t)));
  }
  return mergeTopologies(...parts);
}

/** The logical queues `provision` declares, by name: every configured queue and every queue the stages read or write. */
export function provisionQueues(config: CompiledConfig, stages: readonly StageEndpoints[]): ResolvedQueueConfig[] {
  const queueNames = new Set<string>(config.queues.keys());
  for (const stage of stages) {
    queueNames.add(stage.input);
    for (const output of stage.outputs) queueNames.add(output);
  }
  // A queue's dead_letter_queue is written to as an output is, by whichever stage dead-letters.
  for (const name of [...queueNames]) {
    const target = queueFor(config, name).dead_letter_queue;
    if (target !== undefined) queueNames.add(target);
  }
  return [...queueNames].sort().map((name) => queueFor(config, name));
}

/**
 * A physical work queue with its two companions: `due` (jobs whose wait is over: retries and
 * hand-backs) and `suspect` (jobs redelivered after a crash, run alone; see StageRunner). Only
 * the main queue is bounded by `max_size` (its policy never matches the companions); all three
 * dead-letter to the queue's dead letters.
 */
function workQueues(
  config: CompiledConfig,
  queue: ResolvedQueueConfig,
  names: BrokerNames,
  deadQueue: string,
  suspects: boolean,
  tenant?: string,
  variant?: string,
): QueueSpec[] {
  const work = workQueue(config, queue, names.queue(queue.name, tenant, variant), deadQueue);
  const companion = companionArguments(queue, names, deadQueue);
  const queues = [work, { name: names.dueQueue(queue.name, tenant, variant), durable: work.durable, arguments: { ...companion } }];
  if (suspects) queues.push({ name: names.suspectQueue(queue.name, tenant, variant), durable: work.durable, arguments: { ...companion } });
  return queues;
}

/** The arguments of a `due` or `suspect` companion: unbounded, dead-lettering to the queue's dead letters. */
function companionArguments(queue: ResolvedQueueConfig, names: BrokerNames, deadQueue: string): Record<string, string | number> {
  const companion: Record<string, string | number> = {
    ...queueTypeArguments(queue.type),
    'x-dead-letter-exchange': names.dlx,
    'x-dead-letter-routing-key': deadQueue,
  };
  if (queue.max_priority !== undefined) companion['x-max-priority'] = queue.max_priority;
  return companion;
}

/**
 * The delay ladder delivers to `due` and `suspect`, never to the main queue: the broker's own
 * dead-lettering is not confirmed, and into a full queue with `reject-publish` it drops the job.
 */
function returnBindings(
  config: CompiledConfig,
  names: BrokerNames,
  suspects: boolean,
  queue: string,
  tenant?: string,
  variant?: string,
): BindingSpec[] {
  const bindings = [delayDeliveryBinding(config, names.dueQueue(queue, tenant, variant))];
  if (suspects) bindings.push(delayDeliveryBinding(config, names.suspectQueue(queue, tenant, variant)));
  return bindings;
}

/**
 * The main physical queue. Its bounds (`max_size`, `max_size_bytes`, `overflow_policy`) are not
 * arguments but a policy (queue-policies.ts): arguments cannot change once the queue exists, and
 * a re-declaration with other arguments is refused. `max_priority` stays an argument, because no
 * policy can set it.
 */
function workQueue(config: CompiledConfig, queue: ResolvedQueueConfig, name: string, deadQueue: string): QueueSpec {
  const names = new BrokerNames(config.prefix);
  // Expired and overflowed (drop_oldest) jobs are dead-lettered by the broker, never dropped.
  const args: Record<string, string | number> = {
    ...queueTypeArguments(queue.type),
    'x-dead-letter-exchange': names.dlx,
    'x-dead-letter-routing-key': deadQueue,
  };
  if (queue.max_priority !== undefined) args['x-max-priority'] = queue.max_priority;
  return { name, durable: config.durable, arguments: args };
}
