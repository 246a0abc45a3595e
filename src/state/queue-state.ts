import { BrokerNames, parseBrokerName } from '../topology/names.js';
import type { Topology } from '../topology/topology.types.js';

/**
 * The queue states of seeds/001 5.1, per physical queue: `active` takes new jobs and its stages
 * consume; `paused` takes new jobs but no stage consumes (jobs in flight finish); `draining`
 * takes no new jobs (its entry is unbound, so they land in `unroutable`, kept) while its stages
 * empty it. `deleted` is not a state but `queue delete`.
 *
 * A state other than `active` is kept on the broker as a **marker exchange** (see
 * {@link stateMarker}): durable like the queues, so it holds across stage restarts,
 * reconnects, `provision` and broker restarts; readable by any process with a passive declare,
 * which needs no permission (stages have no management access, and with `security.tenantUsers`
 * no configure permission); listable through the management API for `queues`, `plan` and the
 * admin API. No marker means active. Markers are written by `setQueueState` only.
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

/**
 * The marker exchange of a state: `<prefix>.state.paused.<queue>[.<tenant>[.<variant>]]` (one per
 * physical queue) and `<prefix>.state.draining.<queue>[.<tenant>]` (one per logical queue and
 * tenant). Queue names, tenants and variants have no dots, so a marker names exactly one target.
 */
export function stateMarker(prefix: string, state: MarkedState, target: QueueStateTarget): string {
  return new BrokerNames(prefix).stateMarker(state, target.queue, target.tenant, target.variant);
}

/** Reads a marker's name back, or undefined for any other name. */
export function parseStateMarker(prefix: string, name: string): ({ state: MarkedState } & QueueStateTarget) | undefined {
  const head = `${prefix}.state.`;
  if (!name.startsWith(head)) return undefined;
  const [state, queue, tenant, variant, ...extra] = name.slice(head.length).split('.');
  if ((state !== 'paused' && state !== 'draining') || queue === undefined || queue === '' || extra.length > 0) return undefined;
  if (state === 'draining' && variant !== undefined) return undefined;
  return {
    state,
    queue,
    ...(tenant === undefined ? {} : { tenant }),
    ...(variant === undefined ? {} : { variant }),
  };
}

/** Whether `name` is a state marker under `prefix` (plan and removal tell them from topology). */
export function isStateMarker(prefix: string, name: string): boolean {
  return parseStateMarker(prefix, name) !== undefined;
}

/**
 * The states of every physical queue, read from the marker exchanges present (for example the
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
    for (const name of exchangeNames) {
      const marker = parseStateMarker(prefix, name);
      if (marker === undefined) continue;
      if (marker.state === 'paused') this.paused.add(names.queue(marker.queue, marker.tenant, marker.variant));
      else this.draining.add(names.queue(marker.queue, marker.tenant));
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
 * Every marker a state could leave for the queues of `topology`: the pause marker of each main
 * queue and the drain marker of each entry. For deleting by name, where nothing can list them.
 */
export function possibleStateMarkers(prefix: string, topology: Topology): string[] {
  const names = new BrokerNames(prefix);
  const markers = new Set<string>();
  for (const queue of topology.queues) {
    const parsed = parseBrokerName(prefix, queue.name);
    if (parsed?.kind === 'queue' && parsed.queue !== undefined) {
      markers.add(names.stateMarker('paused', parsed.queue, parsed.tenant, parsed.variant));
    }
  }
  for (const binding of topology.bindings) if (binding.drainMarker !== undefined) markers.add(binding.drainMarker);
  return [...markers];
}
