import type { Delivery } from './delivery.js';
import type { FairShare, SeatOptions, ShareMember, ShareSeat } from './fair-share.js';

export interface DispatcherOptions {
  /** Jobs run at once. */
  concurrency: number;
  /** Processes and settles one delivery; never rejects. */
  process(delivery: Delivery): Promise<void>;
  /** Hands an unstarted delivery back to the broker, unflagged; never rejects. */
  giveBack(delivery: Delivery): Promise<unknown>;
  /**
   * A pooled process's slots, shared with the other tenants' dispatchers: `concurrency` is then
   * ignored, and this dispatcher starts a job only on a slot the share grants it.
   */
  share?: { pool: FairShare } & SeatOptions;
}

/**
 * Decides which delivery runs when: `concurrency` slots for the work queues (`main` and `due`),
 * first come first served, and suspects alone.
 *
 * Invariants:
 * - A delivery is started only while the dispatcher is open; what waits when it closes (paused,
 *   quiet, stopping, or suspended for a suspect) is handed back unstarted, so that nothing sits
 *   prefetched in a process that may be about to die. The owner holds it first, cancels its
 *   consumers, then closes it: a copy handed back can then not come back to this process.
 * - `runAlone()` starts only when nothing else is in flight and nothing waits, and nothing else
 *   starts while it runs: a crash then is that job's own (see IsolationGate).
 */
export class Dispatcher implements ShareMember {
  private readonly waiting: Delivery[] = [];
  private readonly seat: ShareSeat | undefined;
  private running = 0;
  /** `open` starts deliveries; `held` keeps them waiting; `closed` hands them back. */
  private mode: 'open' | 'held' | 'closed' = 'closed';
  private idleWaiters: Array<() => void> = [];
  private readonly giving = new Set<Promise<unknown>>();

  constructor(private readonly options: DispatcherOptions) {
    const share = options.share;
    if (share !== undefined) this.seat = share.pool.join(this, share);
  }

  /** Jobs being processed or settled. */
  get inFlight(): number {
    return this.running;
  }

  /** Starts deliveries from now on. */
  openUp(): void {
    this.mode = 'open';
    this.pump();
  }

  /**
   * Starts nothing more, but keeps what arrives: the caller is cancelling its consumers, and
   * a delivery handed back before that could come straight back to this process.
   */
  hold(): void {
    if (this.mode === 'open') this.mode = 'held';
  }

  /** Starts nothing more; hands back what waits and whatever arrives later. Jobs in flight go on. */
  async close(): Promise<void> {
    this.mode = 'closed';
    await this.giveBackWaiting();
  }

  /** A delivery from a work consumer. */
  offer(delivery: Delivery): void {
    if (this.mode === 'closed') {
      this.handBack(delivery);
      return;
    }
    this.waiting.push(delivery);
    this.pump();
  }

  /**
   * Runs one delivery with nothing else in flight: the caller closed the dispatcher and waited
   * for it to be idle (IsolationGate does both).
   */
  async runAlone(delivery: Delivery): Promise<void> {
    // Outside the share: everything else of the process is suspended, so it takes no one's slot.
    this.running++;
    try {
      await this.options.process(delivery);
    } finally {
      this.running--;
      this.pump();
      this.checkIdle();
    }
  }

  /**
   * Resolves true when nothing is in flight and every hand-back is settled, or false when
   * `graceMs` runs out first.
   */
  whenIdle(graceMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    if (this.running === 0 && this.giving.size === 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      if (Number.isFinite(graceMs)) {
        timer = setTimeout(() => {
          this.idleWaiters = this.idleWaiters.filter((w) => w !== waiter);
          resolve(false);
        }, graceMs);
      }
      this.idleWaiters.push(waiter);
    });
  }

  /** Forgets what waits: its channel is gone and the broker redelivers it. */
  abandonWaiting(isGone: (delivery: Delivery) => boolean): void {
    for (let i = this.waiting.length - 1; i >= 0; i--) if (isGone(this.waiting[i])) this.waiting.splice(i, 1);
  }

  /** Called by the share on a slot it granted (pooled). */
  startOne(): boolean {
    if (this.mode !== 'open' || this.waiting.length === 0) return false;
    const delivery = this.waiting.shift() as Delivery;
    this.running++;
    void this.options.process(delivery).then(this.done, this.done);
    return true;
  }

  /** The owner stops for good: slots still held come back as their jobs end. */
  leaveShare(): void {
    this.seat?.leave();
  }

  private pump(): void {
    if (this.seat !== undefined) {
      if (this.mode === 'open' && this.waiting.length > 0) this.seat.want();
      return;
    }
    while (this.mode === 'open' && this.running < this.options.concurrency && this.waiting.length > 0) {
      const delivery = this.waiting.shift() as Delivery;
      this.running++;
      void this.options.process(delivery).then(this.done, this.done);
    }
  }

  /** Bound once: called for every job, it must not cost a closure each time. */
  private readonly done = (): void => {
    this.running--;
    this.seat?.release();
    this.pump();
    this.checkIdle();
  };

  private async giveBackWaiting(): Promise<void> {
    const unstarted = this.waiting.splice(0);
    await Promise.all(unstarted.map((delivery) => this.handBackNow(delivery)));
  }

  private handBack(delivery: Delivery): void {
    void this.handBackNow(delivery);
  }

  private async handBackNow(delivery: Delivery): Promise<void> {
    const giving = this.options.giveBack(delivery);
    this.giving.add(giving);
    try {
      await giving;
    } finally {
      this.giving.delete(giving);
      this.checkIdle();
    }
  }

  private checkIdle(): void {
    if (this.running !== 0 || this.giving.size !== 0) return;
    for (const waiter of this.idleWaiters.splice(0)) waiter();
  }
}
