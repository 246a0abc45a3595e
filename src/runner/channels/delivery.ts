import type { Message } from 'amqplib';
import type { Permit } from '../../flow/permit.js';
import type { RateLimitedError } from '../../errors/errors.js';
import type { Job } from '../../job/job.types.js';
import type { JobContext } from '../../stage/job-context.js';
import type { ConsumerSource } from './consumer-source.js';

/**
 * Which of an instance's three queues a delivery came from:
 * - `main`: the physical queue producers publish to (bounded by `max_size`);
 * - `due`: jobs whose wait is over (retries back from the delay ladder, jobs handed back
 *   unstarted): already admitted once, so never refused for `max_size`;
 * - `suspect`: jobs redelivered after a crash, run alone.
 */
export type InputKind = 'main' | 'due' | 'suspect';

/** One message in the runner's hands, from delivery to settlement. */
export interface Delivery {
  message: Message;
  /** The channel it arrived on: it is settled there, or not at all. */
  source: ConsumerSource;
  input: InputKind;
  /** The physical queue it came from. */
  queue: string;
  /** The tokens it needs to start (docs/flow-control.md); undefined when no limit applies to it. */
  permit?: Permit;
}

/**
 * What processing a delivery came to: the settlement's input, which it turns into broker
 * operations and a SettlementResult (settlement-result.ts).
 * - `completed`: the handler returned; its emits are settled before the ack.
 * - `failed`: refused at admission (`job` undefined when the body is not a job) or the handler
 *   threw; the retry policy decides. `seconds` is the handler's run time, when it ran.
 *   `refused`: a job refused for its publisher (TENANT_MISMATCH; `job` undefined, it is not
 *   trusted), only so that its batch learns it is dead (its id, batch and type; never its tenant).
 * - `suspect`: redelivered from `main` or `due`: its process died while it was in hand, maybe
 *   only prefetched. Moved to the suspect queue, not judged.
 * - `cancelled`: it (`job cancel`) or its batch was cancelled (DirectiveGate): discarded unrun, reported `cancelled`.
 * - `parked`: its tenant or batch is paused: moved unrun to the parked queue until `resume`.
 * - `rate-limited`: the handler threw RateLimitedError: handed back until then, same attempt,
 *   what it emitted dropped; its limits are held meanwhile (docs/flow-control.md).
 */
export type SettlementInput =
  | { kind: 'completed'; job: Job; ctx: JobContext; seconds: number }
  | { kind: 'failed'; job: Job | undefined; error: unknown; ctx?: JobContext; seconds?: number; refused?: Job }
  | { kind: 'suspect'; job: Job }
  | { kind: 'cancelled'; job: Job; by: 'batch' | 'job' }
  | { kind: 'parked'; job: Job; by: 'tenant' | 'batch' }
  | { kind: 'rate-limited'; job: Job; error: RateLimitedError; ctx: JobContext }
  /** Out of the ladder before its `scheduled_at` (a wait beyond the ladder's reach): it hops on for `waitMs`, same attempt. */
  | { kind: 'not-due'; job: Job; waitMs: number };
