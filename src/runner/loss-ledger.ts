import type { EventLoopWatch } from './event-loop-watch.js';

/** How long a lost delivery is remembered: its redelivery comes as soon as the process reconnects. */
const REMEMBER_MS = 10 * 60 * 1000;
/** Bounded: prefetch times instances is far below this. */
const MAX_ENTRIES = 100_000;

/**
 * The deliveries this process had in hand when it lost a channel or its connection while it was
 * itself healthy (no event-loop stall). When one comes back flagged `redelivered`, the flag tells
 * of that loss, not of a crash: it is taken as a first delivery again, unblamed (no attempt
 * counted, not moved to the suspect queue), instead of joining the suspects that run one by one.
 *
 * Only this process can know: a redelivery that another instance gets is a suspect there, as
 * it must be. A job whose handler stalls the loop (and so loses the connection) is never
 * forgiven: it is the classic poison job.
 */
export class LossLedger {
  private readonly lost = new Map<string, number>();

  constructor(
    private readonly watch: EventLoopWatch,
    /** A stall within this window before the loss blames the jobs in hand. */
    private readonly stallWindowMs: number,
  ) {}

  /** The deliveries in hand on a channel that just closed (by message id). */
  record(messageIds: readonly string[]): void {
    if (messageIds.length === 0 || this.watch.stalledWithin(this.stallWindowMs)) return;
    const now = Date.now();
    this.expire(now);
    for (const id of messageIds) if (this.lost.size < MAX_ENTRIES) this.lost.set(id, now);
  }

  /** True once for a delivery recorded as lost: its redelivery is not a crash. */
  forgive(messageId: unknown): boolean {
    if (typeof messageId !== 'string' || this.lost.size === 0) return false;
    const at = this.lost.get(messageId);
    if (at === undefined) return false;
    this.lost.delete(messageId);
    return Date.now() - at < REMEMBER_MS;
  }

  private expire(now: number): void {
    for (const [id, at] of this.lost) {
      if (now - at < REMEMBER_MS) break;
      this.lost.delete(id);
    }
  }
}
