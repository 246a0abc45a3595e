import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import type { PayloadStore } from './payload-store.js';

/** The longest wait between two sweeps of `stagecoach admin`, whatever `payloads.orphan_after` says. */
export const MAX_SWEEP_INTERVAL_MS = 60 * 60 * 1000;
/** The shortest: `orphan_after` may be as short as a second. */
export const MIN_SWEEP_INTERVAL_MS = 1000;

/** What one sweep did: how many payloads it deleted, and the two cuts it used (ISO 8601). */
export interface SweepResult {
  swept: number;
  /** Payloads still pending and stored before this are orphans. */
  pending_before: string;
  /** Any payload stored before this is past `payloads.retention`. */
  any_before: string;
}

/**
 * One sweep (docs/payloads.md "Lifetime"): deletes the payloads still pending after
 * `payloads.orphan_after` and any payload after `payloads.retention`, counted from `now`.
 * `stagecoach payloads sweep` runs it once; {@link PayloadSweeper} runs it periodically.
 */
export async function sweepPayloads(
  store: PayloadStore,
  payloads: Pick<CompiledConfig['payloads'], 'orphanAfterSeconds' | 'retentionSeconds'>,
  now: number = Date.now(),
): Promise<SweepResult> {
  const pendingBefore = new Date(now - payloads.orphanAfterSeconds * 1000);
  const anyBefore = new Date(now - payloads.retentionSeconds * 1000);
  const swept = await store.sweep(pendingBefore, anyBefore);
  return { swept, pending_before: pendingBefore.toISOString(), any_before: anyBefore.toISOString() };
}

/**
 * How often the admin process sweeps: a quarter of `orphan_after` (an orphan lives at most
 * 1.25 x `orphan_after`), at least a second apart and at most an hour.
 */
export function sweepIntervalMs(orphanAfterSeconds: number): number {
  return Math.min(MAX_SWEEP_INTERVAL_MS, Math.max(MIN_SWEEP_INTERVAL_MS, (orphanAfterSeconds * 1000) / 4));
}

/**
 * The states of a {@link PayloadSweeper}:
 *
 *   idle --> waiting <--> sweeping
 *              |             |
 *              +--> stopping <+--> stopped      (idle --> stopped directly)
 *
 * `waiting` has the next sweep scheduled; `sweeping` runs one; `stopping` waits for the sweep
 * under way to end. A transition the diagram does not allow is ignored, so a sweep that ends
 * after `stop()` never schedules another.
 */
export type PayloadSweeperState = 'idle' | 'waiting' | 'sweeping' | 'stopping' | 'stopped';

const NEXT: Record<PayloadSweeperState, readonly PayloadSweeperState[]> = {
  idle: ['waiting', 'stopped'],
  waiting: ['sweeping', 'stopping'],
  sweeping: ['waiting', 'stopping'],
  stopping: ['stopped'],
  stopped: [],
};

export interface PayloadSweeperOptions {
  store: PayloadStore;
  /** `payloads` of the compiled configuration: the orphan delay and the retention. */
  payloads: Pick<CompiledConfig['payloads'], 'orphanAfterSeconds' | 'retentionSeconds'>;
  log: Logger;
  /** @defaultValue {@link sweepIntervalMs} of `orphan_after` */
  intervalMs?: number;
  /** Told after every sweep that did not fail (tests, metrics). */
  onSwept?: (result: SweepResult) => void;
}

/**
 * Sweeps the payload store periodically inside a long-running process (`stagecoach admin`): the
 * first sweep at `start()`, then every `intervalMs`. A failed sweep (the store away) is logged
 * and the next one tries again. Several processes sweeping one store is safe: each payload is
 * deleted once (a deployment with `admin` replicas, or a CronJob beside it).
 *
 * `stop()` cancels the next sweep and waits for the one under way, so the caller may close the
 * store afterwards; every call gets the same promise.
 */
export class PayloadSweeper {
  private current: PayloadSweeperState = 'idle';
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private stopped: Promise<void> | undefined;
  readonly intervalMs: number;

  constructor(private readonly options: PayloadSweeperOptions) {
    this.intervalMs = options.intervalMs ?? sweepIntervalMs(options.payloads.orphanAfterSeconds);
  }

  get state(): PayloadSweeperState {
    return this.current;
  }

  /** Sweeps at once, then every `intervalMs`. @throws StagecoachError when started before, or stopped. */
  start(): void {
    if (!this.to('waiting')) throw new StagecoachError('INVALID_REQUEST', `the payload sweeper cannot start: it is ${this.current}`);
    this.options.log.info('payload sweeper started', { every_ms: this.intervalMs });
    this.schedule(0);
  }

  /** Cancels the next sweep and waits for the one under way, if any. Safe to call twice. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      clearTimeout(this.timer);
      if (this.to('stopped')) return; // never started
      this.to('stopping');
      await this.sweeping;
      this.to('stopped');
    })();
    return this.stopped;
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => void this.sweep(), delayMs);
    // The process lives for its server, not for the next sweep.
    this.timer.unref();
  }

  private async sweep(): Promise<void> {
    if (!this.to('sweeping')) return;
    this.sweeping = (async () => {
      try {
        const result = await sweepPayloads(this.options.store, this.options.payloads);
        if (result.swept > 0) this.options.log.info('payloads swept', { ...result });
        else this.options.log.debug('payloads swept', { ...result });
        this.options.onSwept?.(result);
      } catch (err) {
        this.options.log.warn('payload sweep failed; the next one tries again', { err: (err as Error).message, next_ms: this.intervalMs });
      }
    })();
    await this.sweeping;
    this.sweeping = undefined;
    if (this.to('waiting')) this.schedule(this.intervalMs);
  }

  private to(state: PayloadSweeperState): boolean {
    if (!NEXT[this.current].includes(state)) return false;
    this.current = state;
    return true;
  }
}
