import os from 'node:os';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';

/**
 * The niceness `stagecoach tracker` runs at unless `--nice` says otherwise. The tracker is
 * background work: on a host it shares with stages (and with the database it writes) it should
 * yield the CPU to them and lag, not slow the pipeline whose reports it folds. It loses nothing
 * by lagging: its reports wait in the stream. Measured (docs/performance.md, bench `--only
 * jobstate`): the relay beside a tracker on the same two cores.
 */
export const TRACKER_NICE = 10;

/** The `--nice` argument: a whole number 0..19 (0 keeps the priority it was started with). */
export function parseNice(text: string | undefined): number {
  if (text === undefined) return TRACKER_NICE;
  const value = /^\d{1,2}$/.test(text) ? Number(text) : NaN;
  if (!(value <= 19)) {
    throw new StagecoachError('INVALID_REQUEST', `--nice "${text}" is not a whole number from 0 to 19`);
  }
  return value;
}

/**
 * Lowers the calling process's scheduling priority by `nice` (Linux applies it to the main
 * thread, where the tracker reads and folds, and to threads started after). Lowering needs no
 * privilege; when the system refuses anyway the tracker runs on, and says so.
 */
export function lowerPriority(nice: number, log: Logger): void {
  if (nice === 0) return;
  try {
    const current = os.getPriority();
    const wanted = Math.min(19, current + nice);
    os.setPriority(wanted);
    log.info('tracker priority lowered: it yields the CPU to stages and lags instead (--nice 0 keeps it)', { nice: wanted });
  } catch (err) {
    log.warn('could not lower the tracker priority; running at the one it was started with', { err: (err as Error).message });
  }
}
