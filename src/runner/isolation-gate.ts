/** A runner as the gate sees it: something that can hold nothing in hand for a while. */
export interface Isolatable {
  /** Stops taking work, hands back what waits, resolves once nothing is in flight. */
  suspend(): Promise<void>;
  /** Takes work again (if it still should: a paused or stopping runner stays so). */
  unsuspend(): void;
}

/**
 * One per process: runs a suspect job with nothing else of the process in hand.
 *
 * A crash takes down everything the process holds, so a suspect that kills it must be the only
 * job there for the crash to be pinned on it, and for no innocent job to die (and be counted as
 * a crash) beside it. `runAlone(fn)` suspends every member (each stops consuming, hands its
 * prefetched deliveries back unstarted, and waits for its jobs in flight), runs `fn`, and lets
 * them go again. Calls queue up one behind another. A member that joins during a call starts
 * suspended.
 */
export class IsolationGate {
  private readonly members = new Set<Isolatable>();
  private readonly suspended = new Set<Isolatable>();
  private chain: Promise<unknown> = Promise.resolve();
  private active = false;

  join(member: Isolatable): void {
    this.members.add(member);
    if (this.active) void this.suspendMember(member);
  }

  leave(member: Isolatable): void {
    this.members.delete(member);
    if (this.suspended.delete(member)) member.unsuspend();
  }

  /** Whether a call is running or waiting for the members to be idle. */
  get isolating(): boolean {
    return this.active;
  }

  runAlone<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(async () => {
      this.active = true;
      try {
        await Promise.all([...this.members].map((member) => this.suspendMember(member)));
        return await fn();
      } finally {
        this.active = false;
        const members = [...this.suspended];
        this.suspended.clear();
        for (const member of members) member.unsuspend();
      }
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  private suspendMember(member: Isolatable): Promise<void> {
    this.suspended.add(member);
    return member.suspend();
  }
}
