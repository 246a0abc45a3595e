/** What a seat's owner does when the share gives it a slot. */
export interface ShareMember {
  /** Starts one waiting job on the slot just granted; false when it has none to start (the slot stays free). */
  startOne(): boolean;
}

export interface SeatOptions {
  /** Share of the slots relative to the other seats with work. @defaultValue 1 */
  weight?: number;
  /** Most slots this seat holds at once, whatever its weight. @defaultValue unbounded */
  maxConcurrency?: number;
}

/**
 * One tenant's place in a {@link FairShare}: its owner (the tenant's dispatcher) says when it has
 * work (`want`) and when a job ended (`release`), and is called back to start a job when a slot
 * is its turn.
 */
export class ShareSeat {
  readonly weight: number;
  readonly maxConcurrency: number;
  /** Slots held now. */
  running = 0;
  /** Virtual finish time of its last grant: the seat with the lowest is served next. */
  pass = 0;
  /** In the share's heap of seats asking for slots. */
  queued = false;
  left = false;

  constructor(
    private readonly share: FairShare,
    readonly member: ShareMember,
    options: SeatOptions,
  ) {
    this.weight = options.weight ?? 1;
    this.maxConcurrency = options.maxConcurrency ?? Number.POSITIVE_INFINITY;
  }

  /** The owner has jobs waiting: grant it slots in its turn. */
  want(): void {
    this.share.want(this);
  }

  /** A job on one of its slots ended. */
  release(): void {
    this.share.release(this);
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
 * The work-conserving property holds as long as the seats have jobs at hand: with one busy
 * tenant, it gets every slot. Deliveries reach a seat by its consumer's prefetch, so a tenant can
 * use at most that many slots at once (see `stages.<name>.tenant_prefetch`).
 */
export class FairShare {
  private free: number;
  /** Min-heap on `pass` of the seats that asked for a slot. */
  private readonly heap: ShareSeat[] = [];
  private virtualTime = 0;
  private granting = false;

  constructor(readonly concurrency: number) {
    this.free = concurrency;
  }

  /** Slots held now, by every seat. */
  get inUse(): number {
    return this.concurrency - this.free;
  }

  join(member: ShareMember, options: SeatOptions = {}): ShareSeat {
    return new ShareSeat(this, member, options);
  }

  want(seat: ShareSeat): void {
    if (seat.queued || seat.left) return;
    if (seat.running >= seat.maxConcurrency) return; // asks again when a job of it ends
    // Idle time earns nothing: it re-enters at the current virtual time.
    if (seat.pass < this.virtualTime) seat.pass = this.virtualTime;
    this.push(seat);
    this.grant();
  }

  release(seat: ShareSeat): void {
    seat.running--;
    this.free++;
    // A seat that was at its cap may have jobs waiting: it asks again through its owner's pump.
    this.grant();
  }

  private grant(): void {
    // Re-entry (a member starting a job that ends synchronously) is folded into the running loop.
    if (this.granting) return;
    this.granting = true;
    try {
      while (this.free > 0 && this.heap.length > 0) {
        const seat = this.pop();
        if (seat.left || seat.running >= seat.maxConcurrency) continue;
        seat.running++;
        this.free--;
        if (!seat.member.startOne()) {
          // Nothing waits after all: the slot stays free, and the seat asks again when it has work.
          seat.running--;
          this.free++;
          continue;
        }
        this.virtualTime = seat.pass;
        seat.pass += 1 / seat.weight;
        if (seat.running < seat.maxConcurrency) this.push(seat);
      }
    } finally {
      this.granting = false;
    }
  }

  private push(seat: ShareSeat): void {
    seat.queued = true;
    const heap = this.heap;
    heap.push(seat);
    let at = heap.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (heap[parent].pass <= seat.pass) break;
      heap[at] = heap[parent];
      at = parent;
    }
    heap[at] = seat;
  }

  private pop(): ShareSeat {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop() as ShareSeat;
    if (heap.length > 0) {
      let at = 0;
      for (;;) {
        const left = 2 * at + 1;
        if (left >= heap.length) break;
        const right = left + 1;
        const child = right < heap.length && heap[right].pass < heap[left].pass ? right : left;
        if (heap[child].pass >= last.pass) break;
        heap[at] = heap[child];
        at = child;
      }
      heap[at] = last;
    }
    top.queued = false;
    return top;
  }
}
