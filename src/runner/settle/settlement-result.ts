import type { Job, JobError } from '../../job/job.types.js';
import type { FailureDecision } from '../../retry/failure-decision.js';
import type { SettledReport, SettlementOutcome } from '../../tracking-stream/tracking-report.js';

/** Where a delivery ended: acknowledged, refused to its queue's dead-letter route, or left to the broker. */
export type Settled = 'acked' | 'rejected' | 'abandoned';

/**
 * What a settlement came to: the one result every settlement concern reads (counts, logs,
 * events, tracking reports, payload release, the HTTP binding's answers). A route carries the
 * result it leads to (settlement-route-builders.ts); the settlement returns it with where the delivery
 * ended (`settled`). Every switch over `kind` ends in {@link assertNever}: a new kind does not
 * compile until each concern has decided what it means to it.
 * - `completed`: the handler returned and its emits were confirmed;
 * - `retried`: back on the delay ladder for `nextAttempt`;
 * - `dead-lettered`: `job` undefined when the body was not a job;
 * - `discarded`: dropped by its retry policy, its handler or its rate limit;
 * - `cancelled`: it or its batch was cancelled before it ran;
 * - `parked`: its tenant or batch is paused; it waits unrun in `returnQueue`'s parked queue;
 * - `suspected`: redelivered after a crash, moved to run alone at `nextAttempt`;
 * - `handed-back`: handed back unstarted (or undone), same attempt, after a wait;
 * - `lost`: its channel closed first: the broker delivers it again, nothing was settled;
 * - `settlement-failed`: the settlement itself failed (a bug): refused to the dead-letter route.
 */
export type SettlementResult =
  | { kind: 'completed'; job: Job; emitted: number; seconds: number }
  | { kind: 'retried'; job: Job; nextAttempt: number; delayMs: number; error: JobError }
  | { kind: 'dead-lettered'; job: Job | undefined; error: JobError; exhausted: boolean }
  | { kind: 'discarded'; job: Job; error: JobError; exhausted: boolean }
  | { kind: 'cancelled'; job: Job; by: 'batch' | 'job' }
  | { kind: 'parked'; job: Job; by: 'tenant' | 'batch'; returnQueue: string }
  | { kind: 'suspected'; job: Job; nextAttempt: number; error: JobError }
  | { kind: 'handed-back' }
  | { kind: 'lost' }
  | { kind: 'settlement-failed'; job: Job | undefined; error: unknown };

/**
 * A result as the settlement returns it: with where its delivery ended, and `report`, the
 * tracking report that tells of it (tracking-report.ts): published before the ack when the job
 * is tracked (batched, or its queue's `tracking` on), only described otherwise; absent where the
 * settlement makes none (most hand-backs, a loss, an untracked completion). A failed settlement
 * carries the `dead` report it published, if it could.
 */
export type SettledResult = SettlementResult & { settled: Settled; report?: SettledReport };

/** The results a route can lead to (a completion, a loss and a failed settlement are not routes). */
export type RouteResult = Exclude<SettlementResult, { kind: 'completed' | 'lost' | 'settlement-failed' }>;

/** A retry policy's decision names a result: a kind renamed or added there fails to compile here. */
const DECISION_KINDS_ARE_RESULTS: FailureDecision['kind'] extends SettlementResult['kind'] ? true : never = true;
void DECISION_KINDS_ARE_RESULTS;

/** Ends a switch that handles every kind: a kind left out is a compile error here. */
export function assertNever(value: never): never {
  throw new Error(`unhandled settlement result: ${JSON.stringify(value)}`);
}

/**
 * The tracking stream's word for a result (tracking-report.ts), or undefined when it makes no
 * report of its own: a hand-back's report is made by the completion it undoes, and a lost or
 * failed settlement is reported (or not) by the settlement's catch-all.
 */
export function trackingOutcome(kind: SettlementResult['kind']): Exclude<SettlementOutcome, 'started'> | undefined {
  switch (kind) {
    case 'completed':
      return 'completed';
    case 'retried':
      return 'retrying';
    case 'dead-lettered':
      return 'dead';
    case 'discarded':
      return 'discarded';
    case 'cancelled':
      return 'cancelled';
    case 'parked':
      return 'parked';
    case 'suspected':
      return 'suspect';
    case 'handed-back':
    case 'lost':
    case 'settlement-failed':
      return undefined;
    default:
      return assertNever(kind);
  }
}
