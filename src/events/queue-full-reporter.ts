import { refusedQueue, refusedWithoutBound } from '../broker/refusal-cause.js';
import { blockTimeoutOf } from '../broker/overflow-block.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { QueueFullError } from '../errors/errors.js';
import type { EventPublisher } from './event-publisher.js';

/** At most one `queue.full` event per physical queue per this many milliseconds, per process. */
export const QUEUE_FULL_EVENT_INTERVAL_MS = 10_000;

/** One refusal, as the reporter tells its `onRefused` listener (metrics). */
export interface QueueFullSighting {
  /** The logical queue, when the refused job said it (`x-ojs-queue`). */
  queue: string | undefined;
  tenant: string | undefined;
  /** The physical queue that refused it, when the route names one (see `refusedQueue`). */
  physicalQueue: string | undefined;
  /** `block` when the job's queue makes its producer wait and try again (each refused try counts), else `reject`. */
  policy: 'reject' | 'block';
}

/**
 * Decides which refusals become events: the first for a physical queue, then the first after
 * the interval has passed since the last event of that queue. Counts the refusals in between, so
 * that an event says how many it stands for. One per process by default ({@link processThrottle}),
 * so that a flood of refusals seen by many publishers of one process still makes one event.
 */
export class QueueFullThrottle {
  private readonly queues = new Map<string, { last: number; refusals: number }>();

  constructor(
    private readonly intervalMs = QUEUE_FULL_EVENT_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Counts one refusal of `queue`. @returns the refusals the event stands for (this one
   * included) when an event is due now, else undefined.
   */
  admit(queue: string): number | undefined {
    const now = this.now();
    const entry = this.queues.get(queue);
    if (entry === undefined) {
      this.queues.set(queue, { last: now, refusals: 0 });
      return 1;
    }
    entry.refusals++;
    if (now - entry.last < this.intervalMs) return undefined;
    const refusals = entry.refusals;
    entry.last = now;
    entry.refusals = 0;
    return refusals;
  }
}

/** The throttle every reporter of this process shares unless given its own. */
export const processThrottle = new QueueFullThrottle();

/**
 * What a process does when a full queue refuses one of its publishes (a `Publisher`'s job, a
 * stage's emit or dead letter): tells `onRefused` (the capacity counter of the metrics) every
 * time, and publishes `queue.full` on `<prefix>.events` as the throttle allows. Hand
 * {@link observe} to `ConfirmPublisher.open` (or a `StageRunner`'s `onQueueFull`).
 *
 * `queue.full` data: `queue`, `tenant` (when the job had one), `physical_queue`, `policy`
 * (`reject`, or `block`: its producer waits and tries again, and every refused try counts; a
 * `drop_oldest` queue refuses nothing), `exchange`, `routing_key`, and `refusals`, the refusals
 * this process saw of that queue since its previous `queue.full` event of it (this one included).
 */
export class QueueFullReporter {
  constructor(
    private readonly config: CompiledConfig,
    private readonly events: EventPublisher | undefined,
    private readonly options: { onRefused?: (sighting: QueueFullSighting) => void; throttle?: QueueFullThrottle } = {},
  ) {}

  /** Never throws: a refusal is reported by its publish already, this only informs. */
  readonly observe = (refusal: QueueFullError): void => {
    // A quorum queue that cannot be full refused for want of a leader (broker/refusal-cause.ts).
    if (refusedWithoutBound(this.config, refusal)) return;
    const physicalQueue = queueOf(this.config, refusal);
    const policy = policyOf(this.config, refusal);
    this.options.onRefused?.({ queue: refusal.queue, tenant: refusal.tenant, physicalQueue, policy });
    if (this.events === undefined) return;
    // A refusal whose queue cannot be named is throttled by its route instead.
    const key = physicalQueue ?? `${refusal.exchange} ${refusal.routingKey}`;
    const refusals = (this.options.throttle ?? processThrottle).admit(key);
    if (refusals === undefined) return;
    void this.events.publish('queue.full', refusal.queue ?? physicalQueue, {
      ...(refusal.queue === undefined ? {} : { queue: refusal.queue }),
      ...(refusal.tenant === undefined ? {} : { tenant: refusal.tenant }),
      ...(physicalQueue === undefined ? {} : { physical_queue: physicalQueue }),
      policy,
      exchange: refusal.exchange,
      routing_key: refusal.routingKey,
      refusals,
    });
  };
}

function policyOf(config: CompiledConfig, refusal: QueueFullError): 'reject' | 'block' {
  if (refusal.queue === undefined) return 'reject';
  try {
    return blockTimeoutOf(config, refusal.queue, refusal.tenant) === undefined ? 'reject' : 'block';
  } catch {
    // A queue the configuration refuses to name (strict_queues): its producer does not wait either.
    return 'reject';
  }
}

function queueOf(config: CompiledConfig, refusal: QueueFullError): string | undefined {
  try {
    return refusedQueue(config, refusal);
  } catch {
    // A queue the configuration refuses to name (strict_queues): the route still identifies it.
    return undefined;
  }
}
