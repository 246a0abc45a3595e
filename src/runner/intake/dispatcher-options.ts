import type { Permit } from '../../flow/permit.js';
import type { Delivery } from '../channels/delivery.js';
import type { FairShare, SeatOptions } from './fair-share.js';

/**
 * A delivery that has waited this long for its limits' tokens goes back to the broker unstarted
 * (through the delay ladder, no attempt counted), ms: the broker closes a channel whose delivery
 * stays unacknowledged past its `consumer_timeout` (30 min by default), and what waits here
 * should not hide from other processes for long either.
 */
export const MAX_PERMIT_WAIT_MS = 60_000;

export interface DispatcherOptions {
  /** Handlers run at once. */
  concurrency: number;
  /**
   * Processes and settles one delivery; never rejects. Calls `handled` (at most once) when its
   * handler is done and only the settlement is left: the delivery's slot is then free.
   */
  process(delivery: Delivery, handled?: () => void): Promise<void>;
  /** Hands an unstarted delivery back to the broker, unflagged; never rejects. */
  handBack(delivery: Delivery): Promise<unknown>;
  /**
   * A pooled process's slots, shared with the other tenants' dispatchers: `concurrency` is then
   * ignored, and this dispatcher starts a job only on a slot the share grants it.
   */
  share?: { pool: FairShare } & SeatOptions;
  /**
   * Flow control (docs/flow-control.md): the permit a delivery needs before it starts, asked for
   * as it arrives; undefined when no limit applies to it. `granted` is called when it is held;
   * `limited` when the job's own policy says `reschedule` or `drop` and its limit is reached.
   */
  admit?: (delivery: Delivery, granted: () => void, limited: (action: 'reschedule' | 'drop', waitMs: number) => void) => Permit | undefined;
  /** A delivery whose limit was reached under `reschedule` or `drop`: settled so (never rejects). */
  limited?: (delivery: Delivery, action: 'reschedule' | 'drop', waitMs: number) => Promise<unknown>;
}
