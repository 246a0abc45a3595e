import type { Message } from 'amqplib';
import type { SettledReport, SettlementOutcome } from '../batch/tracking-report.js';
import {
  batchOf,
  publishGroup,
  publishRecord,
  ReportGroup,
  settledReport,
  type ReportDetails,
  type SettlementPlace,
} from '../batch/tracking-stream.js';
import type { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { routeFor } from '../broker/job-router.js';
import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { PublishError, StagecoachError } from '../errors/errors.js';
import { OJS_HEADERS, toWire, withoutBrokerHeaders, type WireMessage } from '../job/amqp-mapping.js';
import { toJobError } from '../job/job-error.js';
import type { Job, JobError } from '../job/job.types.js';
import { traceIdOf } from '../job/trace-context.js';
import type { Logger } from '../logging/logger.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import { decideFailure } from '../retry/failure-decision.js';
import { resolveRetryPolicy } from '../retry/retry-policy.js';
import { delayRoutingKey } from '../topology/delay-topology.js';
import { BrokerNames, parkKey } from '../topology/names.js';
import type { ChannelSupervisor } from './channel-supervisor.js';
import { deadLetterMessage, originHeaders, type DeadLetterOrigin } from './dead-letters.js';
import type { Delivery, Outcome } from './delivery.js';
import type { PayloadOffloader } from '../payload/payload-offloader.js';
import type { StageRunnerStats } from './runner-stats.js';

export interface SettlementOptions {
  config: CompiledConfig;
  /** The stage's input queue, resolved. */
  input: ResolvedQueueConfig;
  stage: string;
  /** The instance's own queues: retries and hand-backs return there, crashes go to `suspect`. */
  queues: { due: string; suspect: string; dead: string };
  /** Recorded on every dead letter: dead-letter actions route by it, not by the job's claim. */
  origin: DeadLetterOrigin;
  publishers: ChannelSupervisor<ConfirmPublisher>;
  log: Logger;
  stats: StageRunnerStats;
  metrics: InstanceMetrics;
  /** A job was moved to the suspect queue: the dispatcher should run suspects soon. */
  onSuspected(): void;
  /**
   * Waits before trying again a suspect copy the broker refused. The suspect queue is unbounded,
   * so a refusal there means the queue is unavailable for a moment (a quorum queue electing a new
   * leader after its node went down), not full: the copy is published again after each wait, and
   * only when every wait is spent is the delivery rejected to its dead-letter route.
   * @defaultValue SUSPECT_REFUSAL_WAITS_MS (about 12 s in all)
   */
  suspectRefusalWaitsMs?: readonly number[];
  /** Deletes the payload of a job sent by reference once it completed, was discarded or cancelled. */
  payloads?: PayloadOffloader;
}

/** See SettlementOptions.suspectRefusalWaitsMs: longer than a quorum queue's leader election. */
export const SUSPECT_REFUSAL_WAITS_MS: readonly number[] = [250, 500, 1000, 2000, 2000, 2000, 2000, 2000];

/** Where a delivery ended: acknowledged, refused to its queue's dead-letter route, or left to the broker. */
export type Settled = 'acked' | 'rejected' | 'abandoned';

/**
 * The one place that acknowledges, refuses and republishes deliveries. Every outcome closes the
 * job's context first, so that nothing the handler emits later slips past the settlement.
 *
 * Invariants:
 * - At-least-once (seeds/004): a delivery is acknowledged only after whatever replaces it (the
 *   emitted jobs, a retry, a dead letter, a suspect copy, a hand-back copy) was confirmed.
 * - No requeue, ever: a requeued delivery comes back flagged `redelivered`, which reads as a
 *   crash. A delivery to hand back is republished, unflagged, through the delay ladder.
 * - A publish that fails because the publisher channel was lost is tried again on the healed
 *   channel, for as long as the delivery's own channel lives; if that dies too, the broker
 *   redelivers the delivery. A publish the broker refuses (a full `dead_letter_queue`, say)
 *   refuses the delivery instead: the broker dead-letters it by its queue's route, and
 *   `dead list` reads the reason from `x-death`. Nothing loops, nothing is dropped.
 * - Batch tracking (docs/batches.md): a batched job's settlement is reported to the tracking
 *   stream in the same confirm wait as whatever replaces the delivery, before the ack, so no
 *   settlement goes unreported (a crash between report and ack repeats it: at-least-once). A
 *   job without a batch costs one property test. A `completed` report goes out beside the
 *   emits; when an emit then fails, the settlement that follows retracts it.
 * - Payloads (docs/payloads.md): a job sent by reference has its payload deleted after the ack
 *   of a completion, a discard or a cancel, never before: every other outcome republishes the
 *   same reference (retry, suspect, hand-back, park, dead letter).
 * - Retries and hand-backs go to the instance's `due` queue (or back to `suspect`), never to
 *   the main queue: a job admitted once is never refused for `max_size`, and the broker never
 *   dead-letters into a full queue (where `reject-publish` drops it silently).
 */
export class Settlement {
  private readonly names: BrokerNames;
  private readonly place: SettlementPlace;
  /** The completed reports of this turn, waiting to go out together (see report()). */
  private reports: { group: ReportGroup; sent: Promise<void> } | undefined;

  constructor(private readonly options: SettlementOptions) {
    this.names = new BrokerNames(options.config.prefix);
    this.place = { stage: options.stage, queue: options.input.name, tenant: options.origin.tenant };
  }

  /**
   * Settles one delivery by its outcome. Never rejects: a fault in the settlement itself (a bug)
   * refuses the delivery to its queue's dead-letter route rather than leaving it in limbo.
   */
  async settle(delivery: Delivery, outcome: Outcome): Promise<Settled> {
    try {
      if (outcome.kind === 'completed') {
        const batch = batchOf(outcome.job);
        if (batch !== undefined) return await this.completeBatched(delivery, outcome, batch);
        // The hot path, inline: one async frame per job.
        let emitted: number;
        try {
          emitted = await outcome.ctx.settle();
        } catch (err) {
          // The publisher channel was lost under an emit: not the job's fault, so no attempt is
          // counted; it runs again from `due` (its confirmed emits are repeated: at-least-once).
          if (err instanceof PublishError && err.transient) return await this.giveBack(delivery);
          // The broker refused an emit (a full output queue): the job failed like a throw.
          return await this.fail(delivery, outcome.job, err, outcome.seconds);
        }
        return this.completed(delivery, emitted, outcome.seconds);
      }
      if (outcome.kind === 'failed') {
        outcome.ctx?.close();
        if (outcome.job === undefined && outcome.refused !== undefined) return await this.refuse(delivery, outcome.refused, outcome.error);
        return await this.fail(delivery, outcome.job, outcome.error, outcome.seconds);
      }
      if (outcome.kind === 'cancelled') return await this.cancel(delivery, outcome.job);
      if (outcome.kind === 'parked') return await this.park(delivery, outcome.job, outcome.by);
      return await this.suspect(delivery, outcome.job);
    } catch (err) {
      this.options.log.error('settlement failed; rejecting the delivery to its dead-letter route', {
        queue: delivery.queue,
        job_id: delivery.message.properties.messageId,
        err: (err as Error).message,
      });
      await this.reportRejected(delivery, outcome, err);
      delivery.source.reject(delivery.message);
      return 'rejected';
    }
  }

  /**
   * The catch-all's report: the broker dead-letters the delivery, so a batched job is reported
   * `dead`, before the reject (a crash in between repeats the settlement, not loses the report).
   * Best effort: only on a publisher at hand and while the delivery's channel lives (waiting for
   * a healed one here could hold the delivery forever); a failure is logged and the reject goes
   * on. What it cannot know: whether a `completed` report of this settlement was already
   * confirmed; if so the tracker keeps the first final report and counts a conflict.
   */
  private async reportRejected(delivery: Delivery, outcome: Outcome, err: unknown): Promise<void> {
    const job = outcome.job ?? (outcome.kind === 'failed' ? outcome.refused : undefined);
    const batch = batchOf(job);
    const publisher = this.options.publishers.current;
    if (batch === undefined || job === undefined) return;
    if (publisher === undefined || delivery.source.closed) {
      this.options.log.warn('batched job rejected without its dead report: no publisher at hand', { job_id: job.id, batch });
      return;
    }
    // A job refused for its publisher is not trusted: only this queue's tenant is reported.
    const reported = outcome.job === undefined ? { ...job, tenant: this.place.tenant } : job;
    const error = toJobError(err);
    const report = settledReport(reported, batch, this.place, 'dead', {
      error: { type: 'SETTLEMENT_FAILED', message: `settlement failed (${error.message}); rejected to the dead-letter route` },
    });
    await publishRecord(publisher, this.names.tracking, report).catch((failed: unknown) =>
      this.options.log.warn('batched job rejected without its dead report: the report failed', {
        job_id: job.id,
        batch,
        err: (failed as Error).message,
      }),
    );
  }

  /**
   * A job refused at admission for its publisher (TENANT_MISMATCH): dead-lettered byte for byte
   * to this queue's dead letters, never run, never retried (as any job whose body is not
   * trusted). When it claims a batch, that batch is told it is dead, or it would wait for it
   * forever: the report names the claimed job id, batch and type, and the tenant of the queue it
   * was found in (on a shared queue: none), never the tenant it claims. A report the claimed
   * batch's tenant does not match is refused by the tracker.
   */
  private async refuse(delivery: Delivery, claim: Job, thrown: unknown): Promise<Settled> {
    const error = toJobError(thrown);
    const batch = batchOf(claim);
    const report =
      batch === undefined
        ? undefined
        : settledReport({ ...claim, tenant: this.place.tenant }, batch, this.place, 'dead', {
            error: { type: error.type, message: error.message },
          });
    return this.deadLetterHere(delivery, undefined, error, false, report);
  }

  /**
   * A batched job's return: its `completed` report (naming every job it emitted) is published
   * beside the emits and awaited with them, then the delivery is acknowledged. When an emit or
   * the report fails, the job is not complete: it is handed back or failed as on the hot path,
   * and that settlement's report retracts the `completed` one if it reached the stream.
   */
  private async completeBatched(delivery: Delivery, outcome: Extract<Outcome, { kind: 'completed' }>, batch: string): Promise<Settled> {
    const { job, ctx } = outcome;
    // settle() closes the context at once: the children listed below are all there will be
    // (a closed context adds none), so the report can name the context's own list.
    const emits = ctx.settle();
    const { report, sent } = this.report(delivery, job, batch, ctx.children ?? []);
    // Both awaited, neither left unobserved: the report's confirm usually comes after the emits'.
    let failure: { err: unknown; emitted: boolean } | undefined;
    let emitted = 0;
    try {
      emitted = await emits;
    } catch (err) {
      failure = { err, emitted: false };
    }
    let reported = report !== undefined;
    try {
      await sent;
    } catch (err) {
      reported = false;
      failure ??= { err, emitted: true };
    }
    if (failure !== undefined) {
      const { err } = failure;
      const details: ReportDetails = {
        ...(reported ? { retracts: (report as SettledReport).id } : {}),
        ...(ctx.unsent !== undefined && ctx.unsent.length > 0 ? { unsent: [...ctx.unsent] } : {}),
      };
      // As on the hot path: a lost channel is not the job's fault; a refused emit is a failure.
      if (err instanceof PublishError && err.transient) {
        return await this.giveBack(delivery, settledReport(job, batch, this.place, 'retrying', { ...details, next_attempt: job.attempt }));
      }
      if (failure.emitted) throw err;
      return await this.fail(delivery, job, err, outcome.seconds, details);
    }
    return this.completed(delivery, emitted, outcome.seconds);
  }

  /**
   * The end of a completion whose emits (and report) are confirmed: acknowledged, then its
   * payload, if it travelled by reference, deleted (never before the ack), then counted.
   */
  private completed(delivery: Delivery, emitted: number, seconds: number): 'acked' {
    this.ack(delivery);
    this.options.payloads?.release(delivery.message.properties.headers);
    this.options.stats.emitted += emitted;
    this.options.stats.completed++;
    this.options.metrics.completed(seconds);
    return 'acked';
  }

  /**
   * Adds a `completed` report to the group of this turn and returns the group's confirm (see
   * publishThenAck for the other outcomes). The completed reports of one event-loop turn (a
   * burst of confirms completes many jobs at once) go out together in one stream message,
   * flushed on the next turn: one publish, one confirm and one stream entry for all of them,
   * their shared fields written once (publishGroup), instead of one each, which is most of what
   * tracking costs a relay (bench: `--only tracking`). Each settlement still waits for the
   * confirm of the message that holds its report, before its ack; when it fails, every
   * settlement in it fails as its own would have.
   * @returns no report when the delivery's channel is already closed (then `sent` rejects).
   */
  private report(
    delivery: Delivery,
    job: Job,
    batch: string,
    emitted: string[],
  ): { report: SettledReport | undefined; sent: Promise<void> } {
    if (delivery.source.closed) {
      return {
        report: undefined,
        sent: Promise.reject(new PublishError("the delivery's channel closed before its report", this.names.tracking, '', true)),
      };
    }
    let pending = this.reports;
    if (pending === undefined) {
      const group = new ReportGroup();
      const sent = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
        // Closed to newcomers before the first await: a report made from here on starts the next group.
        this.reports = undefined;
        const publisher = await this.options.publishers.ready();
        await publishGroup(publisher, this.names.tracking, group);
      });
      // Observed here: every settlement of the group awaits it, but only after its emits.
      sent.catch(ignore);
      pending = this.reports = { group, sent };
    }
    return { report: pending.group.add(job, batch, this.place, 'completed', { emitted }), sent: pending.sent };
  }

  /** The report of a settlement, when the job is in a batch. */
  private reportOf(job: Job | undefined, outcome: SettlementOutcome, details?: ReportDetails): SettledReport | undefined {
    const batch = batchOf(job);
    return batch === undefined ? undefined : settledReport(job as Job, batch, this.place, outcome, details);
  }

  /**
   * Hands a delivery that was prefetched but never started back to the broker, unflagged, so
   * that another instance (or this one, later) takes it as a first delivery: through the
   * ladder with no delay, to the `due` queue (or back to `suspect`).
   */
  async giveBack(delivery: Delivery, report?: SettledReport): Promise<Settled> {
    const { message } = delivery;
    const routingKey = delayRoutingKey(0, this.returnQueue(delivery));
    const options = { ...message.properties, headers: withoutBrokerHeaders(message.properties.headers) };
    const settled = await this.publishThenAck(
      delivery,
      'hand-back',
      (publisher) => publisher.publish(this.names.retry, routingKey, message.content, options),
      undefined,
      report,
    );
    if (settled === 'acked') this.options.stats.givenBack++;
    return settled;
  }

  private async fail(
    delivery: Delivery,
    job: Job | undefined,
    thrown: unknown,
    seconds?: number,
    details?: ReportDetails,
  ): Promise<Settled> {
    const error = toJobError(thrown);
    if (seconds !== undefined) this.options.metrics.failed(seconds, error.type);
    if (job === undefined) return this.deadLetter(delivery, undefined, error, false);
    // A job here passed admission (a refused one goes by refuse()): whatever failed it, a
    // TENANT_MISMATCH of one of its emits included, its batch is told.
    details = { ...details, error: { type: error.type, message: error.message } };
    if (thrown instanceof StagecoachError && thrown.code === 'POISON') this.options.stats.poisonRedeliveries++;
    const policy = resolveRetryPolicy(this.options.input, job.retry);
    const decision = decideFailure(policy, job.attempt, error, thrown);
    switch (decision.action) {
      case 'retry':
        return this.retry(delivery, job, decision.nextAttempt, decision.delayMs, error, details);
      case 'dead_letter':
        return this.deadLetter(delivery, job, error, decision.exhausted, details);
      case 'discard': {
        this.options.log.warn('job discarded', {
          ...fields(job, delivery.message),
          error_type: error.type,
          error: error.message,
          exhausted: decision.exhausted,
        });
        const settled = await this.endHere(
          delivery,
          'discard report',
          details === undefined ? undefined : this.reportOf(job, 'discarded', details),
        );
        if (settled !== 'acked') return settled;
        this.options.stats.discarded++;
        this.options.metrics.discarded();
        return 'acked';
      }
    }
  }

  /**
   * A job of a cancelled batch, met before it ran: discarded, its `cancelled` report confirmed
   * before the ack (nothing replaces it). Only batched jobs are cancelled (DirectiveGate).
   */
  private async cancel(delivery: Delivery, job: Job): Promise<Settled> {
    const report = this.reportOf(job, 'cancelled', {
      error: { type: 'CANCELLED', message: `its batch "${String(job.meta.batch)}" was cancelled before it ran` },
    });
    const settled = await this.endHere(delivery, 'cancel report', report);
    if (settled === 'acked') this.options.log.info('job cancelled with its batch', fields(job, delivery.message));
    return settled;
  }

  /**
   * A job that ends here, replaced by nothing (discarded, cancelled): acknowledged, a batched one
   * once its report is confirmed; then its payload, if it travelled by reference, is deleted.
   */
  private async endHere(delivery: Delivery, what: string, report: SettledReport | undefined): Promise<Settled> {
    if (report !== undefined) {
      const settled = await this.publishThenAck(delivery, what, () => Promise.resolve(), undefined, report);
      if (settled !== 'acked') return settled;
    } else this.ack(delivery);
    this.options.payloads?.release(delivery.message.properties.headers);
    return 'acked';
  }

  /**
   * A job of a paused tenant or batch, met before it ran: moved unrun, byte for byte, to the
   * parked queue (through `<prefix>.park`, routing key its tenant), with the queue `resume` sends
   * it back to: this instance's `due` (or `suspect`), as a hand-back would. Same attempt: parking
   * is not a try. Its `parked` report says the batch still waits for it.
   */
  private async park(delivery: Delivery, job: Job, by: 'tenant' | 'batch'): Promise<Settled> {
    const { message } = delivery;
    const returnQueue = this.returnQueue(delivery);
    const headers = {
      ...withoutBrokerHeaders(message.properties.headers),
      [OJS_HEADERS.parkedBy]: by,
      [OJS_HEADERS.parkedReturn]: returnQueue,
    };
    const options = { ...message.properties, headers };
    const settled = await this.publishThenAck(
      delivery,
      'park',
      (publisher) => publisher.publish(this.names.park, parkKey(job.tenant), message.content, options),
      undefined,
      this.reportOf(job, 'parked', { next_attempt: job.attempt }),
    );
    if (settled === 'acked')
      this.options.log.info(`job parked: its ${by} is paused`, { ...fields(job, message), return_queue: returnQueue });
    return settled;
  }

  /**
   * Moves a job redelivered from `main` or `due` to the suspect queue, its crashed attempt
   * counted, without judging it: the process that died may only have prefetched it.
   */
  private async suspect(delivery: Delivery, job: Job): Promise<Settled> {
    const error = { type: 'REDELIVERED', message: `attempt ${job.attempt} came back after the process or channel handling it died` };
    const wire = this.retried(delivery.message, job, job.attempt + 1, error);
    const routingKey = delayRoutingKey(0, this.options.queues.suspect);
    const settled = await this.publishThenAck(
      delivery,
      'suspect',
      (publisher) => publisher.publish(this.names.retry, routingKey, wire.content, wire.options),
      undefined,
      this.reportOf(job, 'suspect', { next_attempt: job.attempt + 1, error }),
    );
    if (settled === 'acked') {
      // Counted once it moved: an abandoned move comes back and is counted then.
      this.options.stats.poisonRedeliveries++;
      this.options.log.warn('job redelivered after a crash; moved to the suspect queue to run alone', {
        ...fields(job, delivery.message),
        next_attempt: job.attempt + 1,
      });
      this.options.onSuspected();
    }
    return settled;
  }

  private async retry(
    delivery: Delivery,
    job: Job,
    nextAttempt: number,
    delayMs: number,
    error: JobError,
    details?: ReportDetails,
  ): Promise<Settled> {
    const wire = this.retried(delivery.message, job, nextAttempt, error);
    const routingKey = delayRoutingKey(delayMs, this.returnQueue(delivery));
    const settled = await this.publishThenAck(
      delivery,
      'retry',
      (publisher) => publisher.publish(this.names.retry, routingKey, wire.content, wire.options),
      undefined,
      details === undefined ? undefined : this.reportOf(job, 'retrying', { ...details, next_attempt: nextAttempt }),
    );
    if (settled === 'acked') {
      this.options.stats.retried++;
      this.options.metrics.retried();
      this.options.log.info('job retry scheduled', {
        ...fields(job, delivery.message),
        next_attempt: nextAttempt,
        delay_ms: Math.round(delayMs),
        error_type: error.type,
        error: error.message,
      });
    }
    return settled;
  }

  private async deadLetter(
    delivery: Delivery,
    job: Job | undefined,
    error: JobError,
    exhausted: boolean,
    details?: ReportDetails,
  ): Promise<Settled> {
    const { config, input, stage } = this.options;
    const target = input.dead_letter_queue;
    const report = details === undefined ? undefined : this.reportOf(job, 'dead', details);
    // A job refused at admission (a tenant or type it may not carry here) never ran: its claim
    // is not to be trusted, so it stays in the dead letters of the queue it was found in.
    if (job === undefined || target === undefined || REFUSED_AT_ADMISSION.has(error.type)) {
      return this.deadLetterHere(delivery, job, error, exhausted, report);
    }
    // OJS dead_letter_queue: the job is enqueued, error and all, to the configured queue.
    const dead: Job = {
      ...job,
      queue: target,
      error,
      meta: { ...job.meta, original_queue: job.queue, dead_lettered_at: new Date().toISOString(), stage },
    };
    let route: { exchange: string; routingKey: string };
    let wire: WireMessage;
    try {
      route = routeFor(config, dead);
      wire = toWire(dead, {
        tenantHeader: config.tenantHeader,
        headers: { ...withoutBrokerHeaders(delivery.message.properties.headers), ...originHeaders(this.options.origin) },
      });
      delete wire.options.expiration;
    } catch (err) {
      // The configured queue cannot take it (a type it does not allow): its own dead letters can.
      this.options.log.warn('dead_letter_queue cannot take the job; using the dead letters of its queue', {
        target,
        err: (err as Error).message,
      });
      return this.deadLetterHere(delivery, job, error, exhausted, report);
    }
    let refused = false;
    const settled = await this.publishThenAck(
      delivery,
      'dead letter',
      (publisher) => publisher.publish(route.exchange, route.routingKey, wire.content, wire.options),
      // Refused there (full): the dead letters of its own queue keep it, with the reason.
      () => {
        refused = true;
        return this.deadLetterHere(delivery, job, error, exhausted, report);
      },
      report,
    );
    return refused ? settled : this.published(delivery, job, error, exhausted, settled);
  }

  private async deadLetterHere(
    delivery: Delivery,
    job: Job | undefined,
    error: JobError,
    exhausted: boolean,
    report?: SettledReport,
  ): Promise<Settled> {
    const wire = deadLetterMessage(delivery.message, job, error, this.options.stage, this.options.config.tenantHeader, this.options.origin);
    const dead = this.options.queues.dead;
    return this.published(
      delivery,
      job,
      error,
      exhausted,
      await this.publishThenAck(
        delivery,
        'dead letter',
        (publisher) => publisher.publish(this.names.dlx, dead, wire.content, wire.options),
        undefined,
        report,
      ),
    );
  }

  private published(delivery: Delivery, job: Job | undefined, error: JobError, exhausted: boolean, settled: Settled): Settled {
    if (settled === 'abandoned') return settled;
    this.options.stats.deadLettered++;
    this.options.metrics.deadLettered();
    this.options.log.warn('job dead-lettered', {
      ...(job ? fields(job, delivery.message) : { job_id: delivery.message.properties.messageId }),
      queue: delivery.queue,
      error_type: error.type,
      error: error.message,
      exhausted,
      ...(settled === 'rejected' ? { route: 'broker dead-letter route' } : {}),
    });
    return settled;
  }

  /**
   * Publishes what replaces the delivery, then acknowledges it. A lost publisher channel is
   * waited out (the supervisor heals it) as long as the delivery's channel lives; a refusal by
   * the broker refuses the delivery to its queue's dead-letter route instead.
   *
   * With `report` (a batched job), the settlement report goes to the tracking stream in the same
   * confirm wait; after a lost channel only what was not confirmed is published again (a retry
   * copy published twice would run twice). When the replacement is refused after its report was
   * confirmed, a `dead` report follows it: the broker dead-letters the delivery.
   */
  private async publishThenAck(
    delivery: Delivery,
    what: string,
    publish: (publisher: ConfirmPublisher) => Promise<void>,
    onRefused?: () => Promise<Settled>,
    report?: SettledReport,
  ): Promise<Settled> {
    if (report !== undefined) {
      let sent = false;
      let reported = false;
      const publishing = publish;
      publish = async (publisher) => {
        const [main, side] = await Promise.allSettled([
          sent ? undefined : publishing(publisher),
          reported ? undefined : publishRecord(publisher, this.names.tracking, report),
        ]);
        sent ||= main.status === 'fulfilled';
        reported ||= side.status === 'fulfilled';
        if (main.status === 'rejected') {
          // Refused (not lost) after the report went: the job ends in the broker's dead letters.
          // Not for a suspect copy: a refusal there is tried again (see suspectRefusalWaitsMs).
          if (
            reported &&
            !(main.reason instanceof PublishError && main.reason.transient) &&
            onRefused === undefined &&
            what !== 'suspect'
          ) {
            const dead = { ...report, outcome: 'dead' as const, retracts: report.id, id: `${report.id}.refused` };
            await publishRecord(publisher, this.names.tracking, dead).catch(() => undefined);
          }
          throw main.reason;
        }
        if (side.status === 'rejected') throw side.reason;
      };
    }
    let stale: ConfirmPublisher | undefined;
    let refusals = 0;
    for (;;) {
      if (delivery.source.closed) return this.abandoned(delivery, what);
      let publisher: ConfirmPublisher;
      try {
        publisher = await this.options.publishers.ready(stale);
      } catch {
        // The connection is gone, or the runner stopped: so is the delivery's channel.
        return this.abandoned(delivery, what);
      }
      // Its channel may have died while the publisher healed: the broker redelivers it now, so a
      // copy published here would run beside it (and the ack could not reach the broker anyway).
      if (delivery.source.closed) return this.abandoned(delivery, what);
      try {
        await publish(publisher);
        this.ack(delivery);
        return 'acked';
      } catch (err) {
        if (err instanceof PublishError && err.transient) {
          this.options.log.warn(`${what} not confirmed: the publisher channel was lost; trying again on the healed channel`, {
            queue: delivery.queue,
            job_id: delivery.message.properties.messageId,
            err: err.message,
          });
          stale = publisher;
          continue;
        }
        const waits = this.options.suspectRefusalWaitsMs ?? SUSPECT_REFUSAL_WAITS_MS;
        if (what === 'suspect' && refusals < waits.length) {
          this.options.log.warn('suspect copy refused by the broker (its queue unavailable for now); trying again', {
            queue: delivery.queue,
            job_id: delivery.message.properties.messageId,
            err: (err as Error).message,
          });
          await new Promise((resolve) => setTimeout(resolve, waits[refusals++]));
          continue;
        }
        if (onRefused) return onRefused();
        this.options.log.error(`${what} refused by the broker; rejecting the delivery to its queue's dead-letter route`, {
          queue: delivery.queue,
          job_id: delivery.message.properties.messageId,
          err: (err as Error).message,
        });
        delivery.source.reject(delivery.message);
        return 'rejected';
      }
    }
  }

  private abandoned(delivery: Delivery, what: string): Settled {
    // Its channel is gone: the broker redelivers it; settling here would act on a dead tag.
    this.options.log.debug(`${what} abandoned with its channel`, { queue: delivery.queue, job_id: delivery.message.properties.messageId });
    return 'abandoned';
  }

  private ack(delivery: Delivery): void {
    delivery.source.ack(delivery.message);
    this.options.metrics.acked();
  }

  /** A delivery from the suspect queue stays a suspect; anything else returns by `due`. */
  private returnQueue(delivery: Delivery): string {
    return delivery.input === 'suspect' ? this.options.queues.suspect : this.options.queues.due;
  }

  /** The job again, at `nextAttempt`, with the reason it comes back. */
  private retried(message: Message, job: Job, nextAttempt: number, error: JobError): WireMessage {
    const retried: Job = { ...job, attempt: nextAttempt, meta: { ...job.meta, last_error: { type: error.type, message: error.message } } };
    delete retried.error;
    const headers = withoutBrokerHeaders(message.properties.headers);
    const traceparent = headers[OJS_HEADERS.traceparent];
    const wire = toWire(retried, {
      tenantHeader: this.options.config.tenantHeader,
      headers,
      ...(typeof traceparent === 'string' ? { traceparent } : {}),
    });
    // A per-message TTL would expire the job inside a delay queue and skip the rest of its wait.
    delete wire.options.expiration;
    return wire;
  }
}

function ignore(): void {}

/** Error types of jobs refused before their handler ran: their content is not to be trusted. */
const REFUSED_AT_ADMISSION = new Set(['INVALID_PAYLOAD', 'TENANT_MISMATCH']);

function fields(job: Job, message: Message): Record<string, unknown> {
  const trace = traceIdOf(message.properties.headers?.[OJS_HEADERS.traceparent]);
  return { job_id: job.id, job_type: job.type, tenant: job.tenant, attempt: job.attempt, trace_id: trace };
}
