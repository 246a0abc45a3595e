import type { Delivery, SettlementInput } from '../channels/delivery.js';
import type { SettledResult } from './settlement-result.js';

/** One settlement as its interceptors see it: the delivery and what processing came to. */
export interface SettlementCall {
  readonly delivery: Delivery;
  readonly input: SettlementInput;
}

/** The rest of the chain: the next interceptor, or the settlement itself. */
export type SettleNext = (call: SettlementCall) => Promise<SettledResult>;

/**
 * A concern around settlement (the shape of Temporal's interceptors): it calls `next` once and
 * returns its result, reading it (a waiter told, a retry's time kept) or doing its own work
 * before or after. Registered in StageRunnerOptions.interceptors; the runner owns the order: the
 * first registered is the outermost, and its own concerns (counts, logs, events, tracking
 * reports, payload release) run inside, so every interceptor sees a settlement that is done.
 */
export interface SettlementInterceptor {
  settle(call: SettlementCall, next: SettleNext): Promise<SettledResult>;
}

/** The chain of `interceptors` around `core`, the first outermost; `core` itself when there is none. */
export function intercepted(interceptors: readonly SettlementInterceptor[], core: SettleNext): SettleNext {
  return interceptors.reduceRight<SettleNext>((next, interceptor) => (call) => interceptor.settle(call, next), core);
}
