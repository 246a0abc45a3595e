import type { Channel, Message } from 'amqplib';

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
 * at `setImmediate`, as a single `ack(allUpTo)` when they cover every delivery outstanding up to
 * the highest of them (the common case when jobs finish in order), else one by one. No
 * acknowledgement waits for a slow job ahead of it. Invariant: `outstanding` holds the delivery
 * tags the broker thinks unsettled on this channel, in order; an `allUpTo` never covers a tag
 * that is still being worked on.
 */
export class ConsumerSource implements Settler {
  /** Closed, or closing on purpose: its deliveries are the broker's again. */
  closed = false;
  private readonly outstanding: number[] = [];
  private toAck: Message[] = [];
  private flushing = false;

  constructor(readonly channel: Channel) {}

  delivered(message: Message): void {
    this.outstanding.push(message.fields.deliveryTag);
  }

  ack(message: Message): void {
    this.toAck.push(message);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => this.flush());
  }

  reject(message: Message): void {
    this.forget(message.fields.deliveryTag);
    // On a dead channel the broker has already taken the delivery back: nothing to say.
    if (!this.closed) this.channel.nack(message, false, false);
  }

  /** The channel is gone: its deliveries are the broker's again. */
  abandon(): void {
    this.closed = true;
    this.outstanding.length = 0;
    this.toAck = [];
  }

  /** Sends the acknowledgements gathered so far. */
  flush(): void {
    this.flushing = false;
    const batch = this.toAck;
    if (batch.length === 0) return;
    this.toAck = [];
    if (this.closed) return;
    let last = batch[0];
    for (const message of batch) if (message.fields.deliveryTag > last.fields.deliveryTag) last = message;
    const covered = upperBound(this.outstanding, last.fields.deliveryTag);
    try {
      if (covered === batch.length) {
        this.channel.ack(last, true);
        this.outstanding.splice(0, covered);
      } else {
        for (const message of batch) {
          this.channel.ack(message);
          this.forget(message.fields.deliveryTag);
        }
      }
    } catch {
      // The channel closed under us: the broker redelivers what was not acknowledged.
    }
  }

  private forget(tag: number): void {
    const at = upperBound(this.outstanding, tag) - 1;
    if (at >= 0 && this.outstanding[at] === tag) this.outstanding.splice(at, 1);
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
