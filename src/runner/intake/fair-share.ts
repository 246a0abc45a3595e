import { PassHeap } from './pass-heap.js';

/** What a seat's owner does when the share gives it a slot. */
export interface ShareMember {
  /** Starts one waiting job on the slot just granted; false when it has none to start (the slot stays free). */
  startOne(): boolean;
  /** Has a job it could start now. */
  hasWork?(): boolean;
}

export interface SeatOptions {
  /** Share of the slots relative to the other seats with work. @defaultValue 1 */
  weight?: number;
  /** Most slots this seat holds at once, whatever its weight. @defaultValue unbounded */
  maxConcurrency?: number;
  /** Slots this seat is given before any other seat while it holds fewer and has work. @defaultValue 0 */
  minConcurrency?: number;
}

/**
 * One tenant's place in a {@link FairShare}: its owner (the tenant's dispatcher) says when it has
 * work (`want`) and when a job ended (`release`), and is called back to start a job when a slot
 * is its turn.
 */
export class ShareSeat {
  readonly weight: number;
  readonly maxConcurrency: number;
  readonly minConcurrency: number;
  /** Slots held now (handlers running). */
  running = 0;
  /** Jobs started and not yet settled (running, or settling after their handler). */
  unsettled = 0;
  /** Counted in the share's active weight: it asks for slots or has jobs in flight. */
  active = false;
  /** Virtual finish time of its last grant: the seat with the lowest is served next. */
  pass = 0;
  /** In the share's heap of seats asking for slots (at `heapAt`). */
  queued = false;
  heapAt = -1;
  /** Also in the share's line of seats below their minimum. */
  guaranteed = false;
  left = false;

  constructor(
    private readonly share: FairShare,
    readonly member: ShareMember,
    options: SeatOptions,
  ) {
    this.weight = options.weight ?? 1;
    this.maxConcurrency = options.maxConcurrency ?? Number.POSITIVE_INFINITY;
    this.minConcurrency = Math.min(options.minConcurrency ?? 0, this.maxConcurrency);
  }

  /** Holds fewer slots than its minimum (and may take more). */
  get belowMinimum(): boolean {
    return this.running < this.minConcurrency;
  }

  /** The owner has jobs waiting: grant it slots in its turn. */
  want(): void {
    this.share.want(this);
  }

  /** The handler of a job it started is done: its slot is free (the job may still be settling). */
  release(): void {
    this.share.release(this);
  }

  /** A job it started is settled: no longer in flight. */
  settled(): void {
    this.share.settled(this);
  }

  /** The owner stops; slots it still holds come back through `release()` as its jobs end. */
  leave(): void {
    this.left = true;
  }
}

/**
 * A pooled process's `concurrency` slots, shared by tenants with work in proportion to their
 * weights (start-time fair queuing, the scheduler of weighted fair queueing without its packet
 * sizes): every grant advances the seat's virtual time by 1/weight, and the free slot goes to the
 * asking seat with the lowest. A seat that comes back after being idle starts at the current
 * virtual time, so idleness earns no credit and a flood cannot starve anyone: a tenant with 10
 * jobs waits behind at most one job per other busy tenant, however deep their backlogs. A seat
 * holding its `maxConcurrency` is passed over until one of its jobs ends.
 *
 * A seat with a `minConcurrency` (tenant `min_concurrency`) holding fewer slots than that while it
 * has work is served before every other seat: each slot that frees goes to it until it holds its
 * minimum. No slot is kept idle for it (the share stays work-conserving), so a tenant arriving
 * while others hold every slot reaches its minimum as that many of their jobs end. Its
 * guaranteed grants count in its virtual time like any other, so above its minimum it takes
 * slots by weight only when its weighted share is larger (it holds the larger of the two); that
 * virtual time is kept within `running / weight` of the share's, so that a long stretch at its
 * minimum leaves it no debt to pay off once the other tenants are gone.
 *
 * The work-conserving property holds as long as the seats have jobs at hand: with one busy
 * tenant, it gets every slot. Deliveries reach a seat by its consumer's prefetch, so a tenant can
 * use at most that many slots at once (see `stages.<name>.tenant_prefetch`).
 *
 * A slot is free once its handler returns, while the job settles (emits confirmed, then the ack)
 * beside the next one. With fast handlers the slots are then not what bounds throughput: the jobs
 * in flight until settlement are. So a seat starts a job only while it holds less than its
 * weight's part of `inFlight` unsettled (its weight over the active seats', those asking or with
 * jobs in flight), and is passed over otherwise until one of them settles. The part is the seat's
 * own: a tenant whose settlements stall (its next queue full) holds its part, never the others'.
 * `inFlight` is the most one tenant's prefetch lets it hold anyway: a lone busy tenant is never
 * held back. A part a tenant cannot fill (too few deliveries at hand) is not lent to the others:
 * weights with short jobs need a `tenant_prefetch` well above a tenant's part.
 */
export class FairShare {
  private free: number;
  /** Sum of the weights of the active seats. */
  private activeWeight = 0;
  /** The seats that asked for a slot, lowest `pass` first. */
  private readonly heap = new PassHeap<ShareSeat>();
  /**
   * Seats that asked for a slot while below their minimum, in the order they asked; each is also
   * in the heap. An entry whose seat is no longer below its minimum is dropped when reached.
   */
  private readonly below: ShareSeat[] = [];
  private virtualTime = 0;
  private granting = false;

  /**
   * @param concurrency handlers run at once, shared by weight
   * @param inFlight jobs started and not yet settled, at most, shared by weight. @defaultValue unbounded
   */
  constructor(
    readonly concurrency: number,
    readonly inFlight = Number.POSITIVE_INFINITY,
  ) {
    this.free = concurrency;
  }

  /** The most jobs `seat` may have unsettled now: its weight's part of `inFlight`, rounded up (the parts add up to at least `inFlight`). */
  inFlightBound(seat: ShareSeat): number {
    if (!Number.isFinite(this.inFlight)) return Number.POSITIVE_INFINITY;
    const weight = this.activeWeight > 0 ? this.activeWeight : seat.weight;
    return Math.ceil((this.inFlight * seat.weight) / weight);
  }

  /** May have another job in flight: it holds less than its part, or fewer slots than its minimum (a guarantee of slots, whatever settles). */
  private withinBound(seat: ShareSeat): boolean {
    return seat.belowMinimum || seat.unsettled < this.inFlightBound(seat);
  }

  /** Slots held now, by every seat. */
  get inUse(): number {
    return this.concurrency - this.free;
  }

  join(member: ShareMember, options: SeatOptions = {}): ShareSeat {
    return new ShareSeat(this, member, options);
  }

  want(seat: ShareSeat): void {
    if (seat.left) return;
    if (seat.running >= seat.maxConcurrency) return; // asks again when a job of it ends
    this.activate(seat);
    if (!this.withinBound(seat)) return; // asks again when a job of it settles
    if (!seat.queued) {
      // Idle time earns nothing: it re-enters at the current virtual time.
      if (seat.pass < this.virtualTime) seat.pass = this.virtualTime;
      this.heap.push(seat);
    }
    if (seat.belowMinimum) this.guarantee(seat);
    this.grant();
  }

  release(seat: ShareSeat): void {
    seat.running--;
    this.free++;
    // Passed over at its bound of jobs in flight, now below its minimum with work: the slot is its own.
    if (!seat.queued && !seat.left && seat.belowMinimum && seat.member.hasWork?.() === true) this.want(seat);
    this.grantAgain(seat);
  }

  settled(seat: ShareSeat): void {
    seat.unsettled--;
    this.deactivateIdle(seat);
    this.grant();
  }

  private activate(seat: ShareSeat): void {
    if (seat.active || seat.left) return;
    seat.active = true;
    this.activeWeight += seat.weight;
  }

  /** Out of the active weight once it neither asks nor has a job in flight. */
  private deactivateIdle(seat: ShareSeat): void {
    if (!seat.active || seat.queued || seat.unsettled > 0) return;
    seat.active = false;
    this.activeWeight -= seat.weight;
  }

  private grantAgain(seat: ShareSeat): void {
    // Still asking (its jobs wait in the heap) and now below its minimum: the slot is its own.
    if (seat.queued && seat.belowMinimum) this.guarantee(seat);
    // A seat that was at its cap may have jobs waiting: it asks again through its owner's pump.
    this.grant();
  }

  private guarantee(seat: ShareSeat): void {
    if (seat.guaranteed) return;
    seat.guaranteed = true;
    this.below.push(seat);
  }

  private grant(): void {
    // Re-entry (a member starting a job that ends synchronously) is folded into the running loop.
    if (this.granting) return;
    this.granting = true;
    try {
      while (this.free > 0) {
        if (this.below.length > 0) this.grantGuaranteed(this.below.shift() as ShareSeat);
        else if (this.heap.size > 0) this.grantByWeight(this.heap.pop());
        else break;
      }
    } finally {
      this.granting = false;
    }
  }

  /** A slot to a seat below its minimum, out of turn. */
  private grantGuaranteed(seat: ShareSeat): void {
    seat.guaranteed = false;
    if (seat.left || !seat.queued || !seat.belowMinimum) return;
    if (!this.mayStart(seat) || !this.start(seat)) {
      // At its bound, or nothing waits after all: out of the heap too, until it asks again.
      this.heap.remove(seat);
      this.deactivateIdle(seat);
      return;
    }
    // Counted like any grant, but never more than its holding ahead of the share's virtual time.
    const pass = Math.max(seat.pass, this.virtualTime) + 1 / seat.weight;
    seat.pass = Math.min(pass, this.virtualTime + seat.running / seat.weight);
    this.heap.reposition(seat);
    if (!this.mayStart(seat)) this.heap.remove(seat);
    else if (seat.belowMinimum) this.guarantee(seat);
  }

  /** A slot to the seat whose turn it is by weight. */
  private grantByWeight(seat: ShareSeat): void {
    if (seat.left || !this.mayStart(seat) || !this.start(seat)) {
      this.deactivateIdle(seat); // asks again when it has work, or a job of it ends or settles
      return;
    }
    this.virtualTime = seat.pass;
    seat.pass += 1 / seat.weight;
    if (this.mayStart(seat)) this.heap.push(seat);
  }

  /** Gives `seat` a slot and has its member start a job on it; false (the slot free again) when it had none. */
  private start(seat: ShareSeat): boolean {
    seat.running++;
    seat.unsettled++;
    this.free--;
    if (seat.member.startOne()) return true;
    seat.running--;
    seat.unsettled--;
    this.free++;
    return false;
  }

  /** May take another slot now: below its cap and its bound of jobs in flight. */
  private mayStart(seat: ShareSeat): boolean {
    return seat.running < seat.maxConcurrency && this.withinBound(seat);
  }
}
