import type { Delivery } from '../channels/delivery.js';
import type { ShareMember, ShareSeat } from './fair-share.js';
import { WaitingLine } from './waiting-line.js';
import { MAX_PERMIT_WAIT_MS, type DispatcherOptions } from './dispatcher-options.js';

export { MAX_PERMIT_WAIT_MS, type DispatcherOptions } from './dispatcher-options.js';

/**
 * Decides which delivery runs when: `concurrency` slots for the work queues (`main` and `due`),
 * first come first served, and suspects alone. A slot is a handler running: it is free again when
 * the handler is done, while the settlement (emits confirmed, then the ack) goes on beside the
 * next job, bounded by the prefetch. Holding the slot until the ack kept as many jobs in flight as
 * handlers and left them waiting on the broker's confirms (docs/performance.md).
 *
 * Invariants:
 * - A delivery is started only while the dispatcher is open; what waits when it closes (paused,
 *   quiet, stopping, or suspended for a suspect) is handed back unstarted, so that nothing sits
 *   prefetched in a process that may be about to die. The owner holds it first, cancels its
 *   consumers, then closes it: a copy handed back can then not come back to this process.
 * - `runAlone()` starts only when nothing else is in flight and nothing waits, and nothing else
 *   starts while it runs: a crash then is that job's own (see IsolationGate). It waits for its
 *   flow limits' tokens first, as any job.
 * - With flow control, a delivery starts only once its permit is granted; one still waiting is
 *   passed over for the next one that may start (OJS rate limiting RL-004), and one that waits
 *   beyond MAX_PERMIT_WAIT_MS is handed back. Whatever its permit holds goes back when it ends
 *   or is handed back.
 */
export class Dispatcher implements ShareMember {
  private readonly waiting = new WaitingLine();
  private readonly seat: ShareSeat | undefined;
  /** Handlers running (the slots taken). */
  private running = 0;
  /** Deliveries started and not yet settled: running, or settling after their handler. */
  private unsettled = 0;
  /** `open` starts deliveries; `held` keeps them waiting; `closed` hands them back. */
  private mode: 'open' | 'held' | 'closed' = 'closed';
  private idleWaiters: Array<() => void> = [];
  private readonly giving = new Set<Promise<unknown>>();
  private overdue: NodeJS.Timeout | undefined;

  constructor(private readonly options: DispatcherOptions) {
    const share = options.share;
    if (share !== undefined) this.seat = share.pool.join(this, share);
  }

  /** Jobs being processed or settled. */
  get inFlight(): number {
    return this.unsettled;
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
    clearInterval(this.overdue);
    this.overdue = undefined;
    await this.handBackWaiting();
  }

  /** A delivery from a work consumer. */
  offer(delivery: Delivery): void {
    if (this.mode === 'closed') {
      this.handBack(delivery);
      return;
    }
    if (this.options.admit !== undefined) {
      const permit = this.options.admit(
        delivery,
        () => {
          this.waiting.granted(delivery);
          this.pump();
        },
        (action, waitMs) => this.limitReached(delivery, action, waitMs),
      );
      if (permit !== undefined) {
        delivery.permit = permit;
        this.watchOverdue();
      }
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
    this.unsettled++;
    try {
      // Within its limits, as any job (its process's tokens are all back: nothing else is in
      // hand); one whose tokens do not come in time goes back to the suspect queue, unstarted.
      const permitted = this.options.admit === undefined ? true : await this.permitAlone(delivery);
      if (permitted) await this.options.process(delivery);
      else await this.options.handBack(delivery);
    } finally {
      delivery.permit?.end();
      this.running--;
      this.unsettled--;
      this.pump();
      this.checkIdle();
    }
  }

  /** A suspect's permit: true once granted (or none needed), false when MAX_PERMIT_WAIT_MS ran out first. */
  private permitAlone(delivery: Delivery): Promise<boolean> {
    const admit = this.options.admit;
    if (admit === undefined) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), MAX_PERMIT_WAIT_MS);
      timer.unref();
      const done = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      // Its own policy's `reschedule` or `drop` does not apply: a suspect waits.
      const permit = admit(delivery, done, () => undefined);
      if (permit === undefined) return done();
      delivery.permit = permit;
      if (permit.granted) done();
    });
  }

  /**
   * Resolves true when nothing is in flight and every hand-back is settled, or false when
   * `graceMs` runs out first.
   */
  whenIdle(graceMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    if (this.unsettled === 0 && this.giving.size === 0) return Promise.resolve(true);
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
    for (const delivery of this.waiting.takeAll(isGone)) delivery.permit?.end();
  }

  /** Called by the share on a slot it granted (pooled). */
  startOne(): boolean {
    if (this.mode !== 'open') return false;
    const delivery = this.nextStartable();
    if (delivery === undefined) return false;
    this.start(delivery);
    return true;
  }

  /** Called by the share: a job waits that could start on a slot now. */
  hasWork(): boolean {
    return this.mode === 'open' && this.hasStartable();
  }

  /** The owner stops for good: slots still held come back as their jobs end. */
  leaveShare(): void {
    this.seat?.leave();
  }

  /** Bound once: a granted permit calls it. */
  private readonly pump = (): void => {
    if (this.seat !== undefined) {
      if (this.mode === 'open' && this.hasStartable()) this.seat.want();
      return;
    }
    while (this.mode === 'open' && this.running < this.options.concurrency) {
      const delivery = this.nextStartable();
      if (delivery === undefined) return;
      this.start(delivery);
    }
  };

  private start(delivery: Delivery): void {
    this.running++;
    this.unsettled++;
    // The permit is started (its rate tokens spent) by the processor, right before the handler;
    // its concurrency tokens go back with the slot, when the handler is done.
    let holding = true;
    const handled = (): void => {
      if (!holding) return;
      holding = false;
      delivery.permit?.end();
      this.running--;
      this.seat?.release();
      this.pump();
    };
    const settled = (): void => {
      handled();
      this.unsettled--;
      if (this.seat !== undefined) {
        this.seat.settled();
        // Held back at its bound of jobs in flight: it may ask again now.
        this.pump();
      }
      this.checkIdle();
    };
    void this.options.process(delivery, handled).then(settled, settled);
  }

  /** The first waiting delivery that may start (no permit needed, or granted), taken out of the line. */
  private nextStartable(): Delivery | undefined {
    return this.waiting.next();
  }

  private hasStartable(): boolean {
    return this.waiting.startable;
  }

  /** Its job's own policy does not wait: it is taken out of the line and settled as the policy says. */
  private limitReached(delivery: Delivery, action: 'reschedule' | 'drop', waitMs: number): void {
    if (!this.waiting.remove(delivery)) return;
    delivery.permit?.end();
    const settle = this.options.limited;
    if (settle === undefined || this.mode === 'closed') {
      this.handBack(delivery);
      return;
    }
    void this.track(settle(delivery, action, waitMs));
  }

  /** While deliveries wait for permits, those waiting too long are handed back (see MAX_PERMIT_WAIT_MS). */
  private watchOverdue(): void {
    if (this.overdue !== undefined) return;
    this.overdue = setInterval(
      () => {
        for (const delivery of this.waiting.takeOverdue(performance.now(), MAX_PERMIT_WAIT_MS)) {
          delivery.permit?.end();
          this.handBack(delivery);
        }
        if (!this.waiting.holding) {
          clearInterval(this.overdue);
          this.overdue = undefined;
        }
      },
      Math.min(5000, MAX_PERMIT_WAIT_MS / 4),
    );
    this.overdue.unref();
  }

  private async handBackWaiting(): Promise<void> {
    const unstarted = this.waiting.takeAll();
    for (const delivery of unstarted) delivery.permit?.end();
    await Promise.all(unstarted.map((delivery) => this.handBackNow(delivery)));
  }

  private handBack(delivery: Delivery): void {
    void this.handBackNow(delivery);
  }

  private handBackNow(delivery: Delivery): Promise<void> {
    return this.track(this.options.handBack(delivery));
  }

  /** A settlement of an unstarted delivery: the dispatcher is idle only once it is done. */
  private async track(giving: Promise<unknown>): Promise<void> {
    this.giving.add(giving);
    try {
      await giving;
    } finally {
      this.giving.delete(giving);
      this.checkIdle();
    }
  }

  private checkIdle(): void {
    if (this.unsettled !== 0 || this.giving.size !== 0) return;
    for (const waiter of this.idleWaiters.splice(0)) waiter();
  }
}
