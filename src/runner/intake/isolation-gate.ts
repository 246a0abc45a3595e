import type { Logger } from '../../logging/logger.js';
import { settleWithin } from '../../util/settle-within.js';

/**
 * How long a window waits for its members to hold nothing (their jobs in flight to end), in ms,
 * before it gives up: its calls are refused (a suspect stays in its queue, looked at again
 * later) and every member runs again. A handler that never returns (no `default_timeout`) would
 * otherwise keep every runner of the process suspended for good: one tenant's stuck job would
 * stop every tenant of a pooled process.
 */
export const ISOLATION_IDLE_MS = 60_000;
/** Added to ISOLATION_IDLE_MS per member: suspending 10,000 runners of a pooled process (their consumers cancelled) takes a while of its own. */
export const ISOLATION_IDLE_PER_MEMBER_MS = 10;
/** After a window gave up, how long every call is refused at once, in ms: a stuck job is not waited for again and again. */
export const ISOLATION_RETRY_MS = 600_000;

export interface IsolationGateOptions {
  /** @defaultValue ISOLATION_IDLE_MS plus ISOLATION_IDLE_PER_MEMBER_MS per member */
  idleWithinMs?: number;
  /** @defaultValue ISOLATION_RETRY_MS */
  retryAfterMs?: number;
  /** Told of a window that gave up (warn). */
  log?: Logger;
}

/** A runner as the gate sees it: something that can hold nothing in hand for a while. */
export interface Isolatable {
  /** Stops taking work, hands back what waits, resolves once nothing is in flight. */
  suspend(): Promise<void>;
  /** Takes work again (if it still should: a paused or stopping runner stays so). */
  unsuspend(): void;
}

/**
 * One per process: runs suspect jobs with nothing else of the process in hand.
 *
 * A crash takes down everything the process holds, so a suspect that kills it must be the only
 * job there for the crash to be pinned on it, and for no innocent job to die (and be counted as
 * a crash) beside it. Nothing else may be in flight while a suspect runs, and nothing else in
 * hand either: a delivery held unstarted would come back `redelivered` after the crash and be
 * blamed with it (moved to the suspect queue, its attempt counted). So isolating costs every
 * member its jobs in flight (it waits for them) and its prefetched deliveries (handed back, then
 * fetched again).
 *
 * That cost is paid once per window, not once per suspect: `runAlone(fn)` opens a window when
 * none is open (suspends every member: each stops consuming, hands its prefetched deliveries
 * back and waits for its jobs in flight), and every call made while a window is open (one per
 * runner whose suspect queue has suspects; after a crash, most tenants of a pooled process have
 * some) takes its turn in that window, one after the other; the members go again only when no
 * call is left. A member that joins during a window starts suspended.
 *
 * Lifecycle of a window: requested (waiting while the process attaches, `whileAttaching`),
 * `suspending` (its members, then the calls, in order), closed (every
 * member unsuspended) once the last call ended, then every caller answered; a call that rejects
 * does not end the window, the next one runs. A window whose members are not all idle within
 * `idleWithinMs` gives up: its calls are refused, its members run again, and for
 * `retryAfterMs` no window opens (every call refused at once).
 */
export class IsolationGate {
  private readonly members = new Set<Isolatable>();
  private readonly suspended = new Set<Isolatable>();
  private readonly calls: Array<{ run: () => Promise<() => void>; refuse: (err: unknown) => void }> = [];
  private window: Promise<void> | undefined;
  /** From the members' suspension to the window's close: a member joining then starts suspended. */
  private suspending = false;
  /** (Re)attaches in progress (`whileAttaching`), and their end. */
  private attaching = 0;
  private attached: Promise<void> = Promise.resolve();
  private endAttach: () => void = () => undefined;
  /** Until when (Date.now()) every call is refused, after a window gave up. */
  private refusingUntil = 0;

  constructor(private readonly options: IsolationGateOptions = {}) {}

  join(member: Isolatable): void {
    this.members.add(member);
    if (this.suspending) void this.suspendMember(member);
  }

  /**
   * Runs `attach` (the process attaching its runners to a connection, at start or after a loss)
   * with no window opening meanwhile: after a crash or a lost connection, what comes back is
   * moved to the suspect queues as each runner starts consuming, and a window opened before the
   * last runner consumes would leave that runner's share for another window.
   */
  async whileAttaching<T>(attach: () => Promise<T>): Promise<T> {
    if (this.attaching++ === 0) this.attached = new Promise<void>((resolve) => (this.endAttach = resolve));
    try {
      return await attach();
    } finally {
      if (--this.attaching === 0) this.endAttach();
    }
  }

  leave(member: Isolatable): void {
    this.members.delete(member);
    if (this.suspended.delete(member)) member.unsuspend();
  }

  /** Whether a window is open: calls running or waiting for the members to be idle. */
  get isolating(): boolean {
    return this.window !== undefined;
  }

  runAlone<T>(fn: () => Promise<T>): Promise<T> {
    // A window gave up lately: no member is suspended for a job in flight that may still not end.
    if (Date.now() < this.refusingUntil) {
      return Promise.reject(
        new Error(`isolation refused until ${new Date(this.refusingUntil).toISOString()}: a job in flight did not end`),
      );
    }
    return new Promise<T>((resolve, reject) => {
      // Each caller is answered when the window has closed: its members run again by then.
      const run = (): Promise<() => void> =>
        fn().then(
          (value) => () => resolve(value),
          (err: unknown) => () => reject(err),
        );
      this.calls.push({ run, refuse: reject });
      this.window ??= this.open();
    });
  }

  private async open(): Promise<void> {
    while (this.attaching > 0) await this.attached;
    this.suspending = true;
    try {
      await this.idle([...this.members].map((member) => this.suspendMember(member)));
    } catch (err) {
      // A member could not be isolated: no call may run in this window.
      for (const call of this.calls.splice(0)) call.refuse(err);
    }
    // Calls made while the members were being suspended, or while an earlier one ran, run here:
    // checked again after each, with no await between the last check and the close.
    const answers: Array<() => void> = [];
    for (let call = this.calls.shift(); call !== undefined; call = this.calls.shift()) answers.push(await call.run());
    this.window = undefined;
    this.suspending = false;
    const members = [...this.suspended];
    this.suspended.clear();
    for (const member of members) member.unsuspend();
    for (const answer of answers) answer();
  }

  /**
   * Resolves once every suspension has (the members hold nothing); rejects when one rejects, or
   * when `idleWithinMs` passes first (a job in flight that does not end), then refusing calls
   * for `retryAfterMs`.
   */
  private async idle(suspensions: Array<Promise<void>>): Promise<void> {
    const idleWithinMs = this.options.idleWithinMs ?? ISOLATION_IDLE_MS + ISOLATION_IDLE_PER_MEMBER_MS * this.members.size;
    const allIdle = Promise.all(suspensions).then(() => true);
    if ((await settleWithin(allIdle, idleWithinMs)) !== undefined) return;
    const retryAfterMs = this.options.retryAfterMs ?? ISOLATION_RETRY_MS;
    this.refusingUntil = Date.now() + retryAfterMs;
    this.options.log?.warn('suspects not run: a job in flight did not end in time for them to run alone; every runner goes on', {
      waited_ms: idleWithinMs,
      retry_in_ms: retryAfterMs,
    });
    throw new Error(`isolation gave up: the process's jobs in flight did not end within ${idleWithinMs} ms`);
  }

  private suspendMember(member: Isolatable): Promise<void> {
    this.suspended.add(member);
    return member.suspend();
  }
}
