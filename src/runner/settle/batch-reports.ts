import type { SettledReport, SettlementOutcome } from '../../tracking-stream/tracking-report.js';
import {
  batchOf,
  publishGroup,
  publishRecord,
  ReportGroup,
  settledReport,
  type ReportDetails,
  type SettlementPlace,
} from '../../tracking-stream/tracking-stream.js';
import type { ConfirmPublisher } from '../../broker/confirm-publisher.js';
import { PublishError } from '../../errors/errors.js';
import { toJobError } from '../../job/job-error.js';
import type { Job, JobError } from '../../job/job.types.js';
import type { Logger } from '../../logging/logger.js';
import type { ChannelSupervisor } from '../channels/channel-supervisor.js';
import type { Publish } from './confirm-loop.js';
import type { Delivery, SettlementInput } from '../channels/delivery.js';
import { assertNever, type RouteResult } from './settlement-result.js';

export interface BatchReportsOptions {
  publishers: ChannelSupervisor<ConfirmPublisher>;
  log: Logger;
  /** The tracking stream's name. */
  tracking: string;
  place: SettlementPlace;
  /**
   * The input queue's `tracking` (for the stage's tenant): every job is reported, not only
   * batched ones (docs/job-state.md). Off, an unbatched job costs one property test, as before.
   */
  tracked: boolean;
}

/**
 * Job tracking (docs/batches.md, docs/job-state.md), around the settlement routes rather than
 * inside them: a tracked job's (batched, or of a queue with `tracking` on) settlement is reported to the tracking stream in the same confirm wait as
 * whatever replaces the delivery, before the ack, so no settlement goes unreported (a crash
 * between report and ack repeats it: at-least-once). A job without a batch costs one property
 * test. A `completed` report goes out beside the emits; when an emit then fails, the settlement
 * that follows retracts it.
 */
export class BatchReports {
  /** The completed reports of this turn, waiting to go out together (see completed()). */
  private pending: { group: ReportGroup; sent: Promise<void> } | undefined;

  constructor(private readonly options: BatchReportsOptions) {}

  /**
   * Adds a `completed` report to the group of this turn and returns the group's confirm. The
   * completed reports of one event-loop turn (a burst of confirms completes many jobs at once) go
   * out together in one stream message, flushed on the next turn: one publish, one confirm and
   * one stream entry for all of them, their shared fields written once (publishGroup), instead
   * of one each, which is most of what tracking costs a relay (bench: `--only tracking`). Each
   * settlement still waits for the confirm of the message that holds its report, before its ack;
   * when it fails, every settlement in it fails as its own would have.
   * @returns no report when the delivery's channel is already closed (then `sent` rejects).
   */
  completed(
    delivery: Delivery,
    job: Job,
    batch: string | undefined,
    details: ReportDetails,
  ): { report: SettledReport | undefined; sent: Promise<void> } {
    const { tracking } = this.options;
    if (delivery.source.closed) {
      return {
        report: undefined,
        sent: Promise.reject(new PublishError("the delivery's channel closed before its report", tracking, '', true)),
      };
    }
    const pending = this.group();
    return { report: pending.group.add(job, batch, this.options.place, 'completed', details), sent: pending.sent };
  }

  /**
   * A tracked job's handler is about to run (OJS `active`): reported in this turn's group, not
   * waited for (a `started` lost with a crash only hides the `active` phase; the settlement that
   * follows is reported before its ack as always).
   */
  started(job: Job): void {
    const batch = batchOf(job);
    if (batch === undefined && !this.options.tracked) return;
    this.group().group.add(job, batch, this.options.place, 'started');
  }

  /** The group of this turn's reports, published on the next turn (see completed()). */
  private group(): { group: ReportGroup; sent: Promise<void> } {
    const { tracking } = this.options;
    let pending = this.pending;
    if (pending === undefined) {
      const group = new ReportGroup();
      const sent = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
        // Closed to newcomers before the first await: a report made from here on starts the next group.
        this.pending = undefined;
        const publisher = await this.options.publishers.ready();
        await publishGroup(publisher, tracking, group);
      });
      // Observed here: every settlement of the group awaits it, but only after its emits.
      sent.catch(ignore);
      pending = this.pending = { group, sent };
    }
    return pending;
  }

  /** The report of a settlement of `job`: published only when it is tracked (see tracks()), the settlement's result either way. */
  of(job: Job | undefined, outcome: SettlementOutcome, details?: ReportDetails): SettledReport | undefined {
    if (job === undefined) return undefined;
    return settledReport(job, batchOf(job), this.options.place, outcome, details);
  }

  /** Whether a report goes to the tracking stream: its job is in a batch, or its queue's `tracking` is on. */
  tracks(report: SettledReport): boolean {
    return this.options.tracked || report.batch !== undefined;
  }

  /**
   * The report a route's settlement makes; `details` (the failure,
   * a retraction, unsent children) from the outcome that led to the route. A hand-back's report
   * is made by the completion it undoes (see Settlement.handBack).
   */
  forRoute(event: RouteResult, details: ReportDetails | undefined): SettledReport | undefined {
    switch (event.kind) {
      case 'retried':
        return details === undefined ? undefined : this.of(event.job, 'retrying', { ...details, next_attempt: event.nextAttempt });
      case 'dead-lettered':
        return details === undefined ? undefined : this.of(event.job, 'dead', details);
      case 'discarded':
        return details === undefined ? undefined : this.of(event.job, 'discarded', details);
      case 'cancelled':
        return this.of(event.job, 'cancelled', {
          error: {
            type: 'CANCELLED',
            message:
              batchOf(event.job) === undefined || event.by === 'job'
                ? 'it was cancelled before it ran'
                : `its batch "${String(event.job.meta.batch)}" was cancelled before it ran`,
          },
        });
      case 'parked':
        return this.of(event.job, 'parked', { next_attempt: event.job.attempt });
      case 'suspected':
        return this.of(event.job, 'suspect', { next_attempt: event.nextAttempt, error: event.error });
      case 'handed-back':
        return undefined;
      default:
        return assertNever(event);
    }
  }

  /**
   * The report of a job refused at admission for its publisher (TENANT_MISMATCH): its batch is
   * told it is dead, or it would wait for it forever. It names the claimed job id, batch and
   * type, and the tenant of the queue it was found in (on a shared queue: none), never the
   * tenant it claims; a report the claimed batch's tenant does not match is refused by the tracker.
   */
  refused(claim: Job, error: JobError): SettledReport | undefined {
    return this.of({ ...claim, tenant: this.options.place.tenant }, 'dead', { error: { type: error.type, message: error.message } });
  }

  /**
   * A route's publish with the report beside it, in one confirm wait. After a lost channel only
   * what was not confirmed is published again (a retry copy published twice would run twice).
   * When the replacement is refused after its report was confirmed and the route then rejects
   * the delivery (`deadOnRefusal`), a `dead` report retracts it: the broker dead-letters the job.
   */
  withReport(publish: Publish, report: SettledReport, deadOnRefusal: () => boolean): Publish {
    const { tracking } = this.options;
    let sent = false;
    let reported = false;
    return async (publisher) => {
      const [main, side] = await Promise.allSettled([
        sent ? undefined : publish(publisher),
        reported ? undefined : publishRecord(publisher, tracking, report),
      ]);
      sent ||= main.status === 'fulfilled';
      reported ||= side.status === 'fulfilled';
      if (main.status === 'rejected') {
        if (reported && !(main.reason instanceof PublishError && main.reason.transient) && deadOnRefusal()) {
          const dead = { ...report, outcome: 'dead' as const, retracts: report.id, id: `${report.id}.refused` };
          await publishRecord(publisher, tracking, dead).catch(() => undefined);
        }
        throw main.reason;
      }
      if (side.status === 'rejected') throw side.reason;
    };
  }

  /**
   * The catch-all's report: the broker dead-letters the delivery, so a batched job is reported
   * `dead`, before the reject (a crash in between repeats the settlement, not loses the report).
   * Best effort: only on a publisher at hand and while the delivery's channel lives (waiting for
   * a healed one here could hold the delivery forever); a failure is logged and the reject goes
   * on. What it cannot know: whether a `completed` report of this settlement was already
   * confirmed; if so the tracker keeps the first final report and counts a conflict.
   */
  async rejected(delivery: Delivery, outcome: SettlementInput, err: unknown): Promise<SettledReport | undefined> {
    const { log, place } = this.options;
    const job = outcome.job ?? (outcome.kind === 'failed' ? outcome.refused : undefined);
    const batch = batchOf(job);
    const publisher = this.options.publishers.current;
    if ((batch === undefined && !this.options.tracked) || job === undefined) return undefined;
    if (publisher === undefined || delivery.source.closed) {
      log.warn('batched job rejected without its dead report: no publisher at hand', { job_id: job.id, batch });
      return undefined;
    }
    // A job refused for its publisher is not trusted: only this queue's tenant is reported.
    const reported = outcome.job === undefined ? { ...job, tenant: place.tenant } : job;
    const error = toJobError(err);
    const report = settledReport(reported, batch, place, 'dead', {
      error: { type: 'SETTLEMENT_FAILED', message: `settlement failed (${error.message}); rejected to the dead-letter route` },
    });
    try {
      await publishRecord(publisher, this.options.tracking, report);
      return report;
    } catch (failed) {
      log.warn('batched job rejected without its dead report: the report failed', {
        job_id: job.id,
        batch,
        err: (failed as Error).message,
      });
      return undefined;
    }
  }
}

function ignore(): void {}
