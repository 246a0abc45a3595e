import type { RunnerState } from './lifecycle.js';

/** The runner's channels as `healthy` needs them, read when asked. */
export interface ChannelHealth {
  /** The publisher, the suspect channel and the work channel are all up. */
  open: boolean;
  /** Both work consumers are on. */
  consuming: boolean;
}

/**
 * The one answer to "should this runner consume now?": every place that turns consumers or the
 * dispatcher on or off asks it (WorkConsumers' `wanted`, resume, unsuspend, the suspect watch)
 * and `healthy` judges the channels against it.
 *
 * It is decided by two pieces of state, and by nothing else:
 * - the lifecycle state: only `running` takes work. The queue's state on the broker (`paused`,
 *   `active`, `draining`) is not a separate vote: `applyState` moves the lifecycle into and out
 *   of `paused`, so it reaches here through the lifecycle, and a `quiet` or stopping runner stays
 *   as it is whatever the broker says;
 * - the suspensions by the process's IsolationGate while a suspect runs alone. Counted, not a
 *   flag: a member joining mid-isolation is suspended once more, and every suspend is matched by
 *   one unsuspend.
 *
 * The dispatcher's `hold` is not a third: it is how the runner carries out a "no" (held while
 * the consumers are cancelled, then closed), and `openUp` how it carries out a "yes".
 */
export class ConsumeDecision {
  private suspensions = 0;

  constructor(private readonly lifecycle: { readonly state: RunnerState }) {}

  /** Work consumers on and the dispatcher open: running, and no suspect running alone. */
  get consume(): boolean {
    return this.lifecycle.state === 'running' && this.suspensions === 0;
  }

  /**
   * Suspects may be looked for and taken: running. A suspension does not stop them: it is the
   * gate's own doing, so that a suspect runs with nothing else in hand.
   */
  get takeSuspects(): boolean {
    return this.lifecycle.state === 'running';
  }

  /** A suspect runs alone somewhere in the process: the consumers are off on purpose. */
  get suspended(): boolean {
    return this.suspensions > 0;
  }

  suspend(): void {
    this.suspensions++;
  }

  /** @returns whether to consume again now (the last suspension ended, and still running). */
  unsuspend(): boolean {
    this.suspensions--;
    return this.consume;
  }

  /**
   * True while the runner consumes as it should: every channel up and both consumers on
   * (running), or not meant to consume (paused, quiet, stopping, stopped). Never while starting.
   */
  healthy(channels: () => ChannelHealth): boolean {
    const state = this.lifecycle.state;
    if (state === 'starting') return false;
    if (state !== 'running') return true;
    const { open, consuming } = channels();
    if (!open) return false;
    // Suspended while a suspect runs alone: consumers are off on purpose.
    return this.suspensions > 0 || consuming;
  }
}
