import type { Channel, ConsumeMessage } from 'amqplib';
import type { Bucket } from './bucket.js';

/*
 * The pieces of a TokenSource (token-source.ts): a token in hand, a job waiting for one, and
 * one bucket's line of waiting jobs with its consumer, spares and counts.
 */

/** A token in this process's hands: an unacknowledged message of its bucket's queue. */
export interface Token {
  readonly bucket: Bucket;
  readonly message: ConsumeMessage;
  readonly channel: Channel;
  /** When it came to this process, ms (performance.now): a reused token goes back after a quantum. */
  readonly since: number;
  /** When it became a spare, ms (performance.now). */
  spareSince?: number;
}

/** A wait for a token, cancellable until granted. */
export interface TokenWait {
  cancel(): void;
}

/** A job waiting for a token of one bucket. */
export interface Waiter {
  grant(token: Token): void;
  cancelled: boolean;
  /** When it began waiting, ms (performance.now). */
  asked: number;
}

/** One bucket's waiters and its consumer. */
export class Line {
  readonly waiters: Waiter[] = [];
  state: 'idle' | 'starting' | 'consuming' | 'cancelling' = 'idle';
  tag: string | undefined;
  /** Tokens the current consumer may still be sent. */
  allowance = 0;
  /** Its tokens in this process's jobs' hands. */
  held = 0;
  /** Tokens no job here needs now, oldest first (TokenSource: SPARE_MS). */
  readonly spares: Token[] = [];
  sweep: NodeJS.Timeout | undefined;
  /** When a job last waited for it, ms (performance.now). */
  lastWanted = 0;
  /** Whether other processes wait for its tokens (TokenSource.watchContention). */
  contended = true;

  constructor(
    readonly bucket: Bucket,
    public declared: Promise<void>,
  ) {}

  /** Its consumer started; `allowance` was set before it was asked for. */
  consuming(tag: string): void {
    this.tag = tag;
    this.state = 'consuming';
  }

  /** The consumer went with its channel. */
  reset(): void {
    this.state = 'idle';
    this.tag = undefined;
    this.allowance = 0;
  }

  forget(waiter: Waiter): void {
    const at = this.waiters.indexOf(waiter);
    if (at >= 0) this.waiters.splice(at, 1);
  }
}

/**
 * An ack or nack on a channel that is gone throws in amqplib; its tokens went back to the broker
 * with it, so there is nothing left to settle.
 */
export function settle(operation: () => void): void {
  try {
    operation();
  } catch {
    // The channel is closed: see above.
  }
}
