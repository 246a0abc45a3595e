import { setMaxListeners } from 'node:events';
import type { Channel, Message } from 'amqplib';
import { DeliveryLostError } from '../../errors/errors.js';
import { consumerTimeoutOf } from './consumer-timeout.js';

/**
 * How a delivery is settled; `ConsumerSource` batches the acknowledgements. There is no requeue:
 * a requeued delivery comes back flagged `redelivered`, which stagecoach reads as "the process
 * handling it died". A delivery to give back is published again instead (see Settlement).
 */
export interface Settler {
  ack(message: Message): void;
  /** Refuses the delivery without requeueing it: the broker dead-letters it by its queue's route. */
  reject(message: Message): void;
}

/**
 * One channel a runner takes deliveries on (consumers, or `basic.get`), and settles them on:
 * a delivery tag means something only on the channel that delivered it.
 *
 * Acknowledgements are batched: those settled within one turn of the event loop go out together
 * at `setImmediate`: those below the lowest delivery still unsettled as a single `ack(allUpTo)`
 * (all of them when jobs finish in order), the others one by one. No acknowledgement waits for a
 * slow job ahead of it. A reject goes out at once.
 *
 * Invariants: `outstanding` holds, in order, the tags delivered and not yet settled by this
 * process; a tag leaves it when it is acked or rejected, so settling a delivery twice is a no-op
 * (a second ack of a tag would close the channel with PRECONDITION_FAILED, and every job in
 * flight on it would come back as if crashed); an `allUpTo` never covers an outstanding tag.
 */
export class ConsumerSource implements Settler {
  /** Closed, or closing on purpose: its deliveries are the broker's again. */
  closed = false;
  private readonly outstanding: number[] = [];
  /** The message id of each outstanding tag, in the same order (for the loss ledger). */
  private readonly outstandingIds: unknown[] = [];
  /** The consumer each outstanding tag came from (undefined: `basic.get`), in the same order. */
  private readonly outstandingConsumers: Array<string | undefined> = [];
  /** When each outstanding tag arrived (epoch ms), in the same order. */
  private readonly outstandingAt: number[] = [];
  /** Outstanding tags whose handler started. */
  private readonly running = new Set<number>();
  /** The broker's consumer_timeout, ms, once it closed the channel for it (0: not said). */
  private timeoutMs: number | undefined;
  /**
   * Filled in by `abandon()` after a consumer-timeout close: the message ids of the jobs that were
   * running past the timeout, and the timeout.
   */
  timedOut: { ids: string[]; timeoutMs: number } | undefined;
  /** Per consumer tag, the deliveries in hand when the channel was abandoned (see `inHandAtLoss`). */
  private atLoss: Map<string | undefined, number> | undefined;
  private toAck: Message[] = [];
  private flushing = false;
  private readonly losing = new AbortController();

  constructor(readonly channel: Channel) {
    // One listener per job in flight that looks at its ctx.signal (JobContext links it here
    // until it is settled): bounded by the prefetch, never a leak.
    setMaxListeners(0, this.losing.signal);
  }

  /**
   * Aborted (with a DeliveryLostError) when the channel is gone: every delivery still in hand
   * is the broker's again, and the handlers running them work for nothing.
   */
  get lost(): AbortSignal {
    return this.losing.signal;
  }

  /** Deliveries arrive in tag order on a channel, so `outstanding` stays sorted. */
  delivered(message: Message): void {
    this.outstanding.push(message.fields.deliveryTag);
    this.outstandingIds.push(message.properties.messageId);
    this.outstandingConsumers.push((message.fields as { consumerTag?: string }).consumerTag);
    this.outstandingAt.push(Date.now());
  }

  /** A delivery's handler starts (a consumer-timeout close blames only jobs that ran). */
  started(message: Message): void {
    if (!this.closed) this.running.add(message.fields.deliveryTag);
  }

  /** The channel's 'error': a consumer-timeout close is remembered for `abandon()`. */
  failed(err: Error): void {
    const timeoutMs = consumerTimeoutOf(err);
    if (timeoutMs !== undefined) this.timeoutMs = timeoutMs;
  }

  /**
   * How many deliveries of consumer `consumerTag` were in hand (unsettled with the broker, acks
   * gathered but not sent included) when the channel was abandoned: each took one of its
   * prefetch slots. 0 before.
   */
  inHandAtLoss(consumerTag: string): number {
    return this.atLoss?.get(consumerTag) ?? 0;
  }

  ack(message: Message): void {
    if (!this.forget(message.fields.deliveryTag)) return;
    this.toAck.push(message);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => this.flush());
  }

  reject(message: Message): void {
    if (!this.forget(message.fields.deliveryTag)) return;
    // On a dead channel the broker has already taken the delivery back: nothing to say.
    if (!this.closed) this.channel.nack(message, false, false);
  }

  /**
   * The channel is gone: its deliveries are the broker's again.
   * @returns the message ids of what was in hand and not yet settled with the broker (acks
   * gathered but not sent included): all of it comes back flagged `redelivered`.
   */
  abandon(): string[] {
    const inHand = [...this.outstandingIds, ...this.toAck.map((message) => message.properties.messageId as unknown)].filter(
      (id): id is string => typeof id === 'string',
    );
    if (this.atLoss === undefined) {
      const counts = new Map<string | undefined, number>();
      const consumers = [
        ...this.outstandingConsumers,
        ...this.toAck.map((message) => (message.fields as { consumerTag?: string }).consumerTag),
      ];
      for (const tag of consumers) counts.set(tag, (counts.get(tag) ?? 0) + 1);
      this.atLoss = counts;
    }
    if (this.timeoutMs !== undefined && this.timedOut === undefined)
      this.timedOut = { ids: this.timedOutIds(this.timeoutMs), timeoutMs: this.timeoutMs };
    this.closed = true;
    this.running.clear();
    this.outstandingAt.length = 0;
    this.outstanding.length = 0;
    this.outstandingIds.length = 0;
    this.outstandingConsumers.length = 0;
    this.toAck = [];
    if (!this.losing.signal.aborted) this.losing.abort(new DeliveryLostError());
    return inHand;
  }

  /** Sends the acknowledgements gathered so far. */
  flush(): void {
    this.flushing = false;
    const batch = this.toAck;
    if (batch.length === 0) return;
    this.toAck = [];
    if (this.closed) return;
    // Below the lowest delivery still unsettled, every tag the broker waits for is in this batch
    // (earlier batches went out, rejects at once): one `allUpTo` covers that part; above it,
    // one by one. Handlers finishing out of order (64 at once) would otherwise ack every job alone.
    const lowest = this.outstanding.length === 0 ? Infinity : (this.outstanding[0] as number);
    let covering: Message | undefined;
    const above: Message[] = [];
    for (const message of batch) {
      const tag = message.fields.deliveryTag;
      if (tag > lowest) above.push(message);
      else if (covering === undefined || tag > covering.fields.deliveryTag) covering = message;
    }
    try {
      if (covering !== undefined) this.channel.ack(covering, true);
      for (const message of above) this.channel.ack(message);
    } catch {
      // The channel closed under us: the broker redelivers what was not acknowledged.
    }
  }

  /**
   * The running jobs the broker timed out: those in hand at least the timeout (less the broker's
   * check interval's slack); at least the oldest delivery when it was running (the one the broker
   * named, when the timeout is not known).
   */
  private timedOutIds(timeoutMs: number): string[] {
    const now = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < this.outstanding.length; i++) {
      if (!this.running.has(this.outstanding[i])) continue;
      const oldest = i === 0;
      if (oldest || (timeoutMs > 0 && now - this.outstandingAt[i] >= timeoutMs * 0.9)) {
        const id = this.outstandingIds[i];
        if (typeof id === 'string') ids.push(id);
      }
    }
    return ids;
  }

  /** Removes `tag` from the outstanding tags; false when it was not there (settled already). */
  private forget(tag: number): boolean {
    const at = upperBound(this.outstanding, tag) - 1;
    if (at < 0 || this.outstanding[at] !== tag) return false;
    this.outstanding.splice(at, 1);
    this.outstandingIds.splice(at, 1);
    this.outstandingConsumers.splice(at, 1);
    this.outstandingAt.splice(at, 1);
    this.running.delete(tag);
    return true;
  }
}

/** How many elements of the sorted `values` are <= `value`. */
function upperBound(values: readonly number[], value: number): number {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (values[mid] <= value) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** Sends the acknowledgements gathered so far, then closes the channel on purpose. */
export async function closeSource(source: ConsumerSource): Promise<void> {
  source.flush();
  source.closed = true;
  await source.channel.close().catch(() => undefined);
}
