import { flagName, flagsIn, parseFlagName, type QueueFlag } from '../flags/flag.js';
import { BrokerNames, parseBrokerName } from '../topology/names.js';
import type { Topology } from '../topology/topology.types.js';

/**
 * The queue states (docs/operations.md, "Queue states"), per physical queue: `active` takes new
 * jobs and its stages consume; `paused` takes new jobs but no stage consumes (jobs in flight
 * finish); `draining` takes no new jobs (its entry is unbound, so they land in `unroutable`,
 * kept) while its stages empty it. `deleted` is not a state but `queue delete`.
 *
 * A state other than `active` is a broker flag (src/flags/flag.ts, docs/broker.md "Broker
 * flags"): `queue-paused` or `queue-draining`, a durable marker exchange, so it holds across
 * stage restarts, reconnects, `provision` and broker restarts, and every process can read it.
 * No flag means active. Flags of states are set by `setQueueState` only.
 *
 * Granularity: `paused` is per physical queue (a variant queue can be paused alone). `draining`
 * is per logical queue and tenant, because the entry it cuts (the tenant exchange's binding to
 * the queue, or to its variant router) is shared by the general queue and its variant queues:
 * unbinding a variant queue alone would send its jobs to the general queue, not stop them.
 */
export type QueueState = 'active' | 'paused' | 'draining';

export const QUEUE_STATES: readonly QueueState[] = ['active', 'paused', 'draining'];

/** A state kept as a marker: every state but `active`. */
export type MarkedState = Exclude<QueueState, 'active'>;

/** Which physical queues a state applies to: one logical queue, of one tenant (none when shared), maybe one variant. */
export interface QueueStateTarget {
  queue: string;
  tenant?: string;
  variant?: string;
}

/** The kinds of the flags that queue states are kept as. */
export const STATE_FLAG_KINDS = ['queue-draining', 'queue-paused'] as const;

/**
 * The flag of a state for a target: `queue-paused` of the physical queue, `queue-draining` of the
 * logical queue and tenant (a drain cuts the entry the variant queues share: the variant is dropped).
 */
export function stateFlag(state: MarkedState, target: QueueStateTarget): QueueFlag {
  const where = { queue: target.queue, ...(target.tenant === undefined ? {} : { tenant: target.tenant }) };
  if (state === 'draining') return { kind: 'queue-draining', ...where };
  return { kind: 'queue-paused', ...where, ...(target.variant === undefined ? {} : { variant: target.variant }) };
}

/** Whether `name` is the flag of a queue state under `prefix` (tests tell them from topology). */
export function isStateMarker(prefix: string, name: string): boolean {
  const kind = parseFlagName(prefix, name)?.kind;
  return kind === 'queue-paused' || kind === 'queue-draining';
}

/**
 * The states of every physical queue, read from the flags among exchange names (for example the
 * management API's exchange list). `draining` wins over `paused`: `setQueueState` never leaves
 * both, and a queue that takes no new jobs is draining whatever else is said of it.
 */
export class QueueStates {
  private readonly paused = new Set<string>();
  private readonly draining = new Set<string>();

  constructor(
    readonly prefix: string,
    exchangeNames: Iterable<string>,
  ) {
    const names = new BrokerNames(prefix);
    for (const flag of flagsIn(prefix, exchangeNames, STATE_FLAG_KINDS)) {
      if (flag.kind === 'queue-paused') this.paused.add(names.queue(flag.queue, flag.tenant, flag.variant));
      else this.draining.add(names.queue(flag.queue, flag.tenant));
    }
  }

  /** The state of one physical queue. */
  of(target: QueueStateTarget): QueueState {
    const names = new BrokerNames(this.prefix);
    if (this.draining.has(names.queue(target.queue, target.tenant))) return 'draining';
    return this.paused.has(names.queue(target.queue, target.tenant, target.variant)) ? 'paused' : 'active';
  }

  /** Logical queues (`<queue>[.<tenant>]` as physical general-queue names) that are draining. */
  get drainingQueues(): ReadonlySet<string> {
    return this.draining;
  }

  /** Physical queues paused by a marker of their own. */
  get pausedQueues(): ReadonlySet<string> {
    return this.paused;
  }
}

/**
 * Every flag name a state could leave for the queues of `topology`: the pause flag of each main
 * queue and the drain flag of each entry. For deleting by name, where nothing can list them.
 */
export function possibleStateMarkers(prefix: string, topology: Topology): string[] {
  const markers = new Set<string>();
  for (const queue of topology.queues) {
    const parsed = parseBrokerName(prefix, queue.name);
    if (parsed?.kind === 'queue' && parsed.queue !== undefined)
      markers.add(flagName(prefix, stateFlag('paused', { ...parsed, queue: parsed.queue })));
  }
  for (const binding of topology.bindings) if (binding.drainMarker !== undefined) markers.add(binding.drainMarker);
  return [...markers];
}
