/** A pause of the event loop at least this long counts as a stall. */
const STALL_MS = 1000;
const TICK_MS = 250;

/**
 * Notices when the event loop stalls, so that a lost connection can be told apart from a job
 * that caused it. A handler that computes without awaiting blocks the loop; past two
 * heartbeats the broker drops the connection, and every delivery in hand comes back as if its
 * process had crashed. After a stall, a lost connection is blamed on the jobs in hand (they
 * become suspects); without one, it was the network or the broker, and they are innocent.
 *
 * One per process; the timer does not keep the process alive.
 */
export class EventLoopWatch {
  private lastTick = Date.now();
  private lastStall = Number.NEGATIVE_INFINITY;
  private readonly timer: NodeJS.Timeout;

  constructor() {
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  /**
   * Whether the loop stalled within the last `windowMs`, the stall that may still be ending
   * now included (a close handler can run before the overdue tick does).
   */
  stalledWithin(windowMs: number, now = Date.now()): boolean {
    if (now - this.lastTick >= STALL_MS + TICK_MS) return true;
    return now - this.lastStall < windowMs;
  }

  close(): void {
    clearInterval(this.timer);
  }

  private tick(): void {
    const now = Date.now();
    if (now - this.lastTick >= STALL_MS + TICK_MS) this.lastStall = now;
    this.lastTick = now;
  }
}
