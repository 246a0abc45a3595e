import { batchOf, type ReportDetails } from '../../tracking-stream/tracking-stream.js';
import type { SettledReport } from '../../tracking-stream/tracking-report.js';
import { settingsFor } from '../../config/queue-resolver.js';
import { StagecoachError } from '../../errors/errors.js';
import { toJobError } from '../../job/job-error.js';
import { fromWire } from '../../job/amqp-mapping.js';
import type { FlowControl } from '../../flow/flow-control.js';
import type { Job } from '../../job/job.types.js';
import { BrokerNames } from '../../topology/names.js';
import { AfterSettle } from './after-settle.js';
import { intercepted, type SettleNext } from './settlement-interceptor.js';
import { BatchReports } from './batch-reports.js';
import { ConfirmLoop } from './confirm-loop.js';
import { handBackWait } from './hand-back-wait.js';
import type { Delivery, SettlementInput } from '../channels/delivery.js';
import { RunnerCounts } from './runner-stats.js';
import type { Route, RouteContext } from './settlement-route.types.js';
import { assertNever, type SettledResult } from './settlement-result.js';
import { REFUSAL_WAITS_MS, type SettlementOptions } from './settlement-options.js';
import { trackedCompletion } from './tracked-completion.js';
import {
  cancelRoute,
  deadLetterHereRoute,
  deadLetterRoute,
  discardRoute,
  failureRoute,
  handBackRoute,
  parkRoute,
  suspectRoute,
} from './settlement-route-builders.js';

export type { Settled, SettledResult } from './settlement-result.js';

export { REFUSAL_WAITS_MS, type SettlementOptions } from './settlement-options.js';

const LOST: SettledResult = { kind: 'lost', settled: 'abandoned' };

/**
 * The one place that acknowledges, refuses and republishes deliveries. Every outcome closes the
 * job's context first, so that nothing the handler emits later slips past the settlement. An
 * outcome maps to a route (settlement-route-builders.ts: what replaces the delivery, and what a refusal
 * leads to); the ConfirmLoop carries it out; the batch reports wrap the loop (BatchReports), and
 * the after-settle hook counts, logs and releases payloads (AfterSettle).
 *
 * Invariants:
 * - At-least-once (OJS core spec, delivery guarantees; OJS AMQP binding, acknowledgement after
 *   processing): a delivery is acknowledged only after whatever replaces it (the emitted jobs,
 *   a retry, a dead letter, a suspect copy, a hand-back copy) was confirmed.
 * - No requeue, ever: a requeued delivery comes back flagged `redelivered`, which reads as a
 *   crash. A delivery to hand back is republished, unflagged, through the delay ladder.
 * - A publish that fails because the publisher channel was lost is tried again on the healed
 *   channel, for as long as the delivery's own channel lives; if that dies too, the broker
 *   redelivers the delivery. A publish the broker refuses (a full `dead_letter_queue`, say)
 *   takes the route's refusal policy; at the end of it, the delivery is refused: the broker
 *   dead-letters it by its queue's route, and `dead list` reads the reason from `x-death`
 *   (docs/failures.md). Nothing loops, nothing is dropped.
 * - Batch tracking (docs/batches.md): a batched job's settlement is reported in the same confirm
 *   wait as whatever replaces the delivery, before the ack (see BatchReports).
 * - Payloads (docs/payloads.md): a job sent by reference has its payload deleted after the ack
 *   of a completion, a discard or a cancel, never before: every other outcome republishes the
 *   same reference (retry, suspect, hand-back, park, dead letter).
 * - Retries and hand-backs go to the instance's `due` queue (or back to `suspect`), never to
 *   the main queue: a job admitted once is never refused for `max_size`.
 */
export class Settlement {
  private readonly routes: RouteContext;
  private readonly reports: BatchReports;
  /** The input queue's `tracking` for this tenant: every job is reported (docs/job-state.md). */
  readonly tracked: boolean;
  private readonly loop: ConfirmLoop;
  private readonly after: AfterSettle;
  /** settle() through the interceptors; undefined without any (the hot path keeps its one frame). */
  private readonly chain: SettleNext | undefined;

  constructor(private readonly options: SettlementOptions) {
    const names = new BrokerNames(options.config.prefix);
    const { config, stage, queues, origin, publishers, log, ensureSuspect } = options;
    this.routes = { config, names, stage, queues, origin, ...(ensureSuspect === undefined ? {} : { ensureSuspect }) };
    this.after = new AfterSettle({ ...options, counts: new RunnerCounts(options.stats, options.metrics) });
    this.tracked = settingsFor(config, options.input.name, origin.tenant).tracking !== false;
    this.reports = new BatchReports({
      publishers,
      log,
      tracking: names.tracking,
      place: { stage, queue: options.input.name, tenant: origin.tenant },
      tracked: this.tracked,
    });
    this.loop = new ConfirmLoop({
      publishers,
      log,
      refusalWaitsMs: options.refusalWaitsMs ?? REFUSAL_WAITS_MS,
      ack: (delivery) => this.after.ack(delivery),
      withReport: (publish, report, deadOnRefusal) => this.reports.withReport(publish, report, deadOnRefusal),
    });
    const interceptors = options.interceptors ?? [];
    this.chain = interceptors.length === 0 ? undefined : intercepted(interceptors, (call) => this.core(call.delivery, call.input));
  }

  /**
   * Settles one delivery by its outcome. Never rejects: a fault in the settlement itself (a bug)
   * refuses the delivery to its queue's dead-letter route rather than leaving it in limbo, unless
   * the delivery's channel went meanwhile (then the broker has it again: `abandoned`).
   */
  settle(delivery: Delivery, outcome: SettlementInput): Promise<SettledResult> {
    return this.chain === undefined ? this.core(delivery, outcome) : this.chain({ delivery, input: outcome });
  }

  private async core(delivery: Delivery, outcome: SettlementInput): Promise<SettledResult> {
    // Lost with its channel (its handler aborted, or done too late): the broker delivers it
    // again, so nothing of this run is published, acknowledged or counted (see JobContext).
    if (delivery.source.closed) return this.lost(delivery, outcome);
    try {
      if (outcome.kind === 'completed') {
        const batch = batchOf(outcome.job);
        if (batch !== undefined || this.tracked) return await this.completeTracked(delivery, outcome, batch);
        // The hot path, inline: one async frame per job.
        let emitted: number;
        try {
          emitted = await outcome.ctx.settle();
        } catch (err) {
          // A lost channel or a queue without a leader: not the job's fault (handBackWait).
          const wait = handBackWait(err);
          if (wait !== undefined) return await this.handBack(delivery, undefined, wait);
          // The broker refused an emit (a full output queue): the job failed like a throw.
          return await this.fail(delivery, outcome.job, err, outcome.seconds);
        }
        return this.after.completed(delivery, outcome.job, emitted, outcome.seconds);
      }
      switch (outcome.kind) {
        case 'failed':
          outcome.ctx?.close();
          if (outcome.job === undefined && outcome.refused !== undefined) {
            // Refused at admission for its publisher (TENANT_MISMATCH): dead-lettered byte for
            // byte here, never run, never retried; its claimed batch is told it is dead.
            const error = toJobError(outcome.error);
            return await this.take(
              delivery,
              deadLetterHereRoute(this.routes, delivery, undefined, error, false),
              this.reports.refused(outcome.refused, error),
            );
          }
          return await this.fail(delivery, outcome.job, outcome.error, outcome.seconds);
        case 'cancelled':
          return await this.route(delivery, cancelRoute(outcome.job, outcome.by));
        case 'parked':
          return await this.route(delivery, parkRoute(this.routes, delivery, outcome.job, outcome.by));
        case 'suspect':
          return await this.route(delivery, suspectRoute(this.routes, delivery, outcome.job));
        case 'rate-limited': {
          // Not a try: what it emitted is dropped, and it comes back after the wait, same attempt.
          outcome.ctx.close();
          const { job, error } = outcome;
          const delayMs = Math.max(0, error.until.getTime() - Date.now());
          const report = this.reports.of(job, 'retrying', {
            next_attempt: job.attempt,
            // Its own name: a visibility timeout's hand-back (VisibilityExpiredError) says so.
            error: { type: error.name, message: error.message },
          });
          return await this.take(delivery, handBackRoute(this.routes, delivery, delayMs), report);
        }
        case 'not-due':
          // Back on the ladder for the rest of its wait (at most the ladder's reach again), byte for
          // byte, to this due queue; no report: the job store still has it `scheduled`.
          return await this.take(delivery, handBackRoute(this.routes, delivery, outcome.waitMs));
        default:
          return assertNever(outcome);
      }
    } catch (err) {
      // Failed because its connection went meanwhile (no publisher to be had for its report):
      // the broker has taken the delivery back, there is nothing to reject and nothing went wrong.
      if (delivery.source.closed) return this.lost(delivery, outcome);
      this.options.log.error('settlement failed; rejecting the delivery to its dead-letter route', {
        queue: delivery.queue,
        job_id: delivery.message.properties.messageId,
        err: (err as Error).message,
      });
      const report = await this.reports.rejected(delivery, outcome, err);
      delivery.source.reject(delivery.message);
      const failed = { kind: 'settlement-failed', settled: 'rejected', job: outcome.job, error: err } as const;
      return report === undefined ? failed : { ...failed, report };
    }
  }

  private lost(delivery: Delivery, outcome: SettlementInput): SettledResult {
    if ('ctx' in outcome) outcome.ctx?.close();
    this.options.log.debug('delivery lost with its channel; nothing settled', {
      queue: delivery.queue,
      job_id: delivery.message.properties.messageId,
      outcome: outcome.kind,
    });
    return LOST;
  }

  /**
   * Hands a delivery that was prefetched but never started back to the broker, unflagged (see
   * handBackRoute). `report`: the `retrying` report of a batched completion it undoes.
   * `waitMs`: how long it stays on the delay ladder first.
   */
  async handBack(delivery: Delivery, report?: SettledReport, waitMs = 0): Promise<SettledResult> {
    return this.take(delivery, handBackRoute(this.routes, delivery, waitMs), report);
  }

  /**
   * A job whose own `rate_limit` policy does not wait met its limit before it started (OJS
   * rate-limiting extension 6.2): `reschedule` hands it back for about a window, same attempt;
   * `drop` discards it (lossy, as asked: counted, evented `rate_limit.dropped`). A body that is
   * not a job is handed back instead: its refusal, with the reason, is the processor's.
   */
  async limitReached(delivery: Delivery, action: 'reschedule' | 'drop', waitMs: number, flow?: FlowControl): Promise<SettledResult> {
    if (action === 'reschedule') return this.take(delivery, handBackRoute(this.routes, delivery, waitMs));
    let job: Job;
    try {
      job = fromWire(delivery.message, this.options.config.tenantHeader).job;
    } catch {
      return this.handBack(delivery);
    }
    flow?.dropped(job);
    const error = {
      type: 'RateLimitDropped',
      message: `dropped: its rate_limit "${job.rate_limit?.key ?? '?'}" was reached (on_limit: drop)`,
    };
    return this.route(delivery, discardRoute(job, error, false), { error });
  }

  /** A tracked job's handler is about to run: reported `started` (OJS `active`), not waited for. */
  started(job: Job): void {
    this.reports.started(job);
  }

  /**
   * A tracked job's return (see trackedCompletion): once its emits and `completed` report are
   * confirmed, the delivery is acknowledged; when either failed, the job is handed back or failed
   * as on the hot path.
   */
  private async completeTracked(
    delivery: Delivery,
    outcome: Extract<SettlementInput, { kind: 'completed' }>,
    batch: string | undefined,
  ): Promise<SettledResult> {
    const { job } = outcome;
    const { emitted, failure, report } = await trackedCompletion(this.reports, this.options.log, delivery, outcome, batch);
    if (failure === undefined) return this.after.completed(delivery, job, emitted, outcome.seconds, report);
    const { err, details } = failure;
    // As on the hot path: a lost channel or a leaderless queue is not the job's fault; a refused emit is a failure.
    const wait = handBackWait(err);
    if (wait !== undefined) {
      return await this.handBack(delivery, this.reports.of(job, 'retrying', { ...details, next_attempt: job.attempt }), wait);
    }
    if (failure.emitted) throw err;
    return await this.fail(delivery, job, err, outcome.seconds, details);
  }

  /** A failure, routed by the job's retry policy; a body that is not a job is dead-lettered as it is. */
  private fail(
    delivery: Delivery,
    job: Job | undefined,
    thrown: unknown,
    seconds?: number,
    details?: ReportDetails,
  ): Promise<SettledResult> {
    const error = toJobError(thrown);
    this.after.failed(seconds, error.type, job !== undefined && thrown instanceof StagecoachError && thrown.code === 'POISON');
    if (job === undefined) return this.take(delivery, deadLetterRoute(this.routes, this.options.input, delivery, undefined, error, false));
    // A job here passed admission (a refused one is routed in settle()): whatever failed it, a
    // TENANT_MISMATCH of one of its emits included, its batch is told.
    return this.route(
      delivery,
      failureRoute(this.routes, this.options.input, delivery, job, error, thrown),
      { ...details, error: { type: error.type, message: error.message } },
      true,
    );
  }

  /** Takes a route with the report its result makes. `failed`: see AfterSettle.settled. */
  private route(delivery: Delivery, route: Route, details?: ReportDetails, failed = false): Promise<SettledResult> {
    return this.take(delivery, route, this.reports.forRoute(route.result, details), failed);
  }

  private async take(delivery: Delivery, route: Route, report?: SettledReport, failed = false): Promise<SettledResult> {
    if (route.detour !== undefined) {
      this.options.log.warn('dead_letter_queue cannot take the job; using the dead letters of its queue', {
        target: route.detour.target,
        err: route.detour.reason,
      });
    }
    const published = report !== undefined && this.reports.tracks(report) ? report : undefined;
    return this.after.settled(delivery, route, await this.loop.run(delivery, route, published), failed, report);
  }
}
