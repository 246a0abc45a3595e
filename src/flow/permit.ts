import type { Bucket } from './bucket.js';
import { EXCEEDED_AFTER_MS } from './flow-watch.js';
import type { Token, TokenSource, TokenWait } from './token-source.js';

/**
 * The tokens one job needs to start, taken one bucket after another in the order given
 * (concurrency buckets first: see `bucketsOf`), so that two jobs never hold each other's next
 * token. Lifecycle: `waiting` until every token is held (then `onGranted`), `started` once its
 * handler is about to run (its rate and throttle tokens are spent), `ended` when the job ends or
 * never starts (what it still holds goes back: a job refused, cancelled or parked before its
 * handler spends nothing).
 */
export class Permit {
  private readonly held: Token[] = [];
  private wait: TokenWait | undefined;
  private state: 'waiting' | 'granted' | 'started' | 'ended' = 'waiting';
  /** When the job began waiting, ms (performance.now). */
  readonly since = performance.now();

  private limitTimer: NodeJS.Timeout | undefined;

  /**
   * @param onLimit for a job whose policy says `reschedule` or `drop`: called once when it has
   * waited EXCEEDED_AFTER_MS without its tokens (the limit is reached), with the wait a token of
   * the bucket it waits for takes to come back; the caller ends the permit.
   */
  constructor(
    private readonly source: TokenSource,
    private readonly buckets: readonly Bucket[],
    private readonly onGranted: (permit: Permit) => void,
    onLimit?: (expectedWaitMs: number) => void,
  ) {
    this.next();
    if (onLimit !== undefined && this.state === 'waiting') {
      this.limitTimer = setTimeout(() => {
        if (this.state === 'waiting') onLimit(this.blockedOn?.cooldownMs ?? 1000);
      }, EXCEEDED_AFTER_MS);
      this.limitTimer.unref();
    }
  }

  /** The partitions it takes tokens of. */
  get partitions(): string[] {
    return [...new Set(this.buckets.map((bucket) => bucket.partition))];
  }

  get granted(): boolean {
    return this.state === 'granted';
  }

  /** The bucket it waits for now, while waiting. */
  get blockedOn(): Bucket | undefined {
    return this.state === 'waiting' ? this.buckets[this.held.length] : undefined;
  }

  /** The job starts: its rate and throttle tokens are spent, its concurrency tokens held on. */
  start(): void {
    if (this.state !== 'granted') return;
    this.state = 'started';
    for (let i = this.held.length - 1; i >= 0; i--) {
      const token = this.held[i];
      if (token.bucket.strategy === 'concurrency') continue;
      this.source.spend(token);
      this.held.splice(i, 1);
    }
  }

  /** The job ended, or will not start here: what it holds goes back (to a job waiting here first). */
  end(): void {
    clearTimeout(this.limitTimer);
    if (this.state === 'ended') return;
    const started = this.state === 'started';
    this.state = 'ended';
    this.wait?.cancel();
    this.wait = undefined;
    for (const token of this.held.splice(0)) {
      if (started) this.source.release(token);
      else this.source.giveBack(token);
    }
  }

  private next(): void {
    const bucket = this.buckets[this.held.length];
    if (bucket === undefined) {
      clearTimeout(this.limitTimer);
      this.state = 'granted';
      this.onGranted(this);
      return;
    }
    this.wait = this.source.take(bucket, (token) => {
      this.wait = undefined;
      if (this.state === 'ended') {
        this.source.giveBack(token);
        return;
      }
      this.held.push(token);
      this.next();
    });
  }
}
