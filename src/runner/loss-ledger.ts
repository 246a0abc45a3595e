import type { EventLoopWatch } from './event-loop-watch.js';

/** How long a lost delivery is remembered: its redelivery comes as soon as the process reconnects. */
const REMEMBER_MS = 10 * 60 * 1000;
/** Bounded: prefetch times instances is far below this. */
const MAX_ENTRIES = 100_000;
/** How long this process's own losses are announced to the others (LossAnnouncer), ms. */
const ANNOUNCE_MS = 10_000;
/**
 * After a loss of its own, how long a redelivery this process cannot tell for its own waits for
 * another process to excuse it (ms): the broker went or closed connections, and the process whose
 * delivery it was probably lives and is reconnecting. Without a loss of its own, a redelivery is a
 * crash's (another process died) and is blamed at once.
 */
const EXCUSE_WAIT_MS = 5_000;
/** The window after a loss of its own in which redeliveries wait for an excuse, ms. */
const EXCUSE_WINDOW_MS = 30_000;

/**
 * What this process lost with a channel or its connection while it was itself healthy (no
 * event-loop stall). When such a delivery comes back flagged `redelivered`, the flag tells of that
 * loss, not of a crash: it is taken as a first delivery again, unblamed (no attempt counted, not
 * moved to the suspect queue), instead of joining the suspects that run one by one.
 *
 * The rule (docs/failures.md, "Lost deliveries"): a redelivery is forgiven only when this process
 * can tell it was its own loss:
 * - its message id was in hand (received, not yet settled with the broker) on the channel that
 *   died: `record(ids)`;
 * - or it was sent into that channel and never arrived (a connection cut with deliveries on the
 *   wire): the broker had at most `prefetch` unacknowledged deliveries out per consumer, so at
 *   most `prefetch` minus what was in hand can have been lost on the way (`record(ids, unseen)`,
 *   per queue; 1 for a `basic.get` in progress). The broker puts a dead channel's deliveries back
 *   at their place in the queue, ahead of anything never delivered, so they come back first: a
 *   redelivered delivery of that queue this process never saw is forgiven against that count
 *   while the queue's deliveries arriving here are all redelivered (`arrived`); the first one
 *   that is not ends it.
 *
 * Anything else is blamed as it must be: a redelivery this process never saw, beyond that count
 * or after fresh deliveries, was in the hands of another process that died. The count cannot
 * tell which redelivered delivery at the head is which: when another consumer of the same queue
 * died at the same moment, one of its jobs can be taken for one of ours and run unblamed here
 * once (a poison job then crashes this process too and comes back a suspect, its attempt
 * counted: one more crash, never a lost job). A job whose handler stalls the loop (and so loses
 * the connection) is never forgiven: it is the classic poison job.
 */
export class LossLedger {
  private readonly lost = new Map<string, number>();
  /** Jobs whose attempt the broker timed out (consumer_timeout), with the timeout, ms. */
  private readonly timedOut = new Map<string, { at: number; timeoutMs: number }>();
  /** Deliveries other processes lost while alive (an `excuse` control message), by message id. */
  private readonly excused = new Map<string, number>();
  /** Redeliveries waiting for an excuse, by message id. */
  private readonly awaiting = new Map<string, Array<(excused: boolean) => void>>();
  /** This process's own recent losses, to announce (LossAnnouncer), by message id. */
  private readonly toAnnounce = new Map<string, number>();
  /** Jobs the broker timed out here lately, to announce (LossAnnouncer): whoever they come back to dead-letters them. */
  private readonly timedOutToAnnounce = new Map<string, { at: number; timeoutMs: number }>();
  /** When this process last lost deliveries of its own (epoch ms). */
  private lastLoss = -Infinity;
  /** Told when this process records losses of its own (LossAnnouncer sends them). */
  onLoss: (() => void) | undefined;
  /** Per queue: deliveries the broker may have sent into a lost channel that never arrived. */
  private readonly unseen = new Map<string, { count: number; at: number }>();

  constructor(
    private readonly watch: EventLoopWatch,
    /** A stall within this window before the loss blames the jobs in hand. */
    private readonly stallWindowMs: number,
  ) {}

  /**
   * A channel just closed: the deliveries in hand on it (by message id), and per queue how many
   * more the broker may have sent it that never arrived.
   */
  record(
    messageIds: readonly string[],
    unseen?: ReadonlyMap<string, number>,
    timedOut?: { readonly ids: readonly string[]; readonly timeoutMs: number },
  ): void {
    if (timedOut !== undefined && timedOut.ids.length > 0) {
      this.recordTimedOut(timedOut.ids, timedOut.timeoutMs);
      const at = Date.now();
      for (const id of timedOut.ids) {
        if (this.timedOutToAnnounce.size < MAX_ENTRIES) this.timedOutToAnnounce.set(id, { at, timeoutMs: timedOut.timeoutMs });
      }
      this.onLoss?.();
    }
    this.lastLoss = Date.now();
    if ((messageIds.length === 0 && (unseen === undefined || unseen.size === 0)) || this.watch.stalledWithin(this.stallWindowMs)) return;
    const now = Date.now();
    this.expire(now);
    for (const id of messageIds) {
      if (this.lost.size < MAX_ENTRIES) this.lost.set(id, now);
      // A job the broker timed out is not excused anywhere: it is dead-lettered where it comes back to this process.
      if (this.toAnnounce.size < MAX_ENTRIES && !this.timedOut.has(id)) this.toAnnounce.set(id, now);
    }
    if (messageIds.length > 0) this.onLoss?.();
    if (unseen === undefined) return;
    for (const [queue, count] of unseen) {
      if (count > 0) this.unseen.set(queue, { count: (this.unseen.get(queue)?.count ?? 0) + count, at: now });
    }
  }

  /**
   * A delivery arrived from `queue`, in the broker's order. At the head of a queue with unseen
   * losses, a redelivered one this process never had is taken as one of them (see the rule).
   */
  arrived(queue: string, messageId: unknown, redelivered: boolean): void {
    // The hot path: nothing lost unseen, nothing to do.
    if (this.unseen.size === 0) return;
    const head = this.unseen.get(queue);
    if (head === undefined) return;
    if (!redelivered || Date.now() - head.at >= REMEMBER_MS) {
      this.unseen.delete(queue);
      return;
    }
    if (typeof messageId !== 'string' || this.lost.has(messageId) || this.lost.size >= MAX_ENTRIES) return;
    this.lost.set(messageId, Date.now());
    if (--head.count === 0) this.unseen.delete(queue);
  }

  /**
   * Jobs that were running when the broker closed their channel for its `consumer_timeout`: their
   * redelivery is dead-lettered (ConsumerTimeoutError), not run again, whatever the loop did.
   */
  recordTimedOut(messageIds: readonly string[], timeoutMs: number): void {
    const now = Date.now();
    for (const [id, entry] of this.timedOut) if (now - entry.at >= REMEMBER_MS) this.timedOut.delete(id);
    for (const id of messageIds) if (this.timedOut.size < MAX_ENTRIES) this.timedOut.set(id, { at: now, timeoutMs });
  }

  /** Once for a job recorded as timed out by the broker: the timeout it met, ms (0: not known). */
  timedOutBy(messageId: unknown): number | undefined {
    if (typeof messageId !== 'string' || this.timedOut.size === 0) return undefined;
    const entry = this.timedOut.get(messageId);
    if (entry === undefined) return undefined;
    this.timedOut.delete(messageId);
    this.lost.delete(messageId);
    return Date.now() - entry.at < REMEMBER_MS ? entry.timeoutMs : undefined;
  }

  /** This process's losses of the last ANNOUNCE_MS, for the other processes (LossAnnouncer). */
  announcement(): string[] {
    const now = Date.now();
    for (const [id, at] of this.toAnnounce) {
      if (now - at < ANNOUNCE_MS) break;
      this.toAnnounce.delete(id);
    }
    return [...this.toAnnounce.keys()];
  }

  /** The jobs the broker timed out here in the last ANNOUNCE_MS, by the timeout they met (ms), for the other processes. */
  timedOutAnnouncement(): Map<number, string[]> {
    const now = Date.now();
    const byTimeout = new Map<number, string[]>();
    for (const [id, entry] of this.timedOutToAnnounce) {
      if (now - entry.at >= ANNOUNCE_MS) {
        this.timedOutToAnnounce.delete(id);
        continue;
      }
      const ids = byTimeout.get(entry.timeoutMs);
      if (ids === undefined) byTimeout.set(entry.timeoutMs, [id]);
      else ids.push(id);
    }
    return byTimeout;
  }

  /** Another process, alive, lost these deliveries (an `excuse` control message): not crashes. */
  excuse(messageIds: readonly string[]): void {
    const now = Date.now();
    for (const [id, at] of this.excused) {
      if (now - at < REMEMBER_MS) break;
      this.excused.delete(id);
    }
    for (const id of messageIds) {
      if (this.excused.size < MAX_ENTRIES) this.excused.set(id, now);
      for (const resolve of this.awaiting.get(id) ?? []) resolve(true);
      this.awaiting.delete(id);
    }
  }

  /**
   * Whether a redelivery this process cannot forgive is excused by the process that lost it:
   * at once when it already said so; after a loss of this process's own (a broker restart, closed
   * connections: the other process lives and is reconnecting), when it says so within EXCUSE_WAIT_MS.
   */
  awaitExcuse(messageId: unknown): Promise<boolean> {
    if (typeof messageId !== 'string' || this.timedOut.has(messageId)) return Promise.resolve(false);
    if (this.excused.has(messageId)) return Promise.resolve(true);
    if (Date.now() - this.lastLoss > EXCUSE_WINDOW_MS) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const waiters = this.awaiting.get(messageId) ?? [];
      this.awaiting.set(messageId, waiters);
      const timer = setTimeout(() => {
        const left = (this.awaiting.get(messageId) ?? []).filter((waiter) => waiter !== done);
        if (left.length > 0) this.awaiting.set(messageId, left);
        else this.awaiting.delete(messageId);
        resolve(false);
      }, EXCUSE_WAIT_MS);
      timer.unref();
      const done = (excused: boolean): void => {
        clearTimeout(timer);
        resolve(excused);
      };
      waiters.push(done);
    });
  }

  /** True once for a delivery recorded as lost, or excused by the process that lost it: its redelivery is not a crash (a job the broker timed out never is). */
  forgive(messageId: unknown): boolean {
    if (typeof messageId !== 'string' || this.timedOut.has(messageId)) return false;
    if (this.excused.delete(messageId)) return true;
    if (this.lost.size === 0) return false;
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
