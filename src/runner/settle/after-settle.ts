import type { Message } from 'amqplib';
import type { JobEvents } from '../../events/job-events.js';
import { OJS_HEADERS } from '../../job/amqp-mapping.js';
import type { Job } from '../../job/job.types.js';
import { traceIdOf } from '../../job/trace-context.js';
import type { Logger } from '../../logging/logger.js';
import type { PayloadOffloader } from '../../payload/payload-offloader.js';
import type { Delivery } from '../channels/delivery.js';
import type { SettledReport } from '../../tracking-stream/tracking-report.js';
import type { RunnerCounts } from './runner-stats.js';
import type { Route } from './settlement-route.types.js';
import { assertNever, type Settled, type SettledResult } from './settlement-result.js';

export interface AfterSettleOptions {
  log: Logger;
  /** Where every event is counted, once. */
  counts: RunnerCounts;
  /** A job was moved to the suspect queue: the dispatcher should run suspects soon. */
  onSuspected(): void;
  payloads?: PayloadOffloader;
  /** The input queue's `job.*` events; absent when its `events` is off (the default). */
  events?: JobEvents | undefined;
}

/**
 * What follows a settlement, around the routes rather than inside them: its counts, its log
 * line and, after the ack of a completion, a discard or a cancel, the release of a payload sent
 * by reference (docs/payloads.md; never before the ack: every other route republishes the same
 * reference). This is the only place settlement counts, each event once (RunnerCounts).
 * Counted once settled: an abandoned delivery comes back and is counted then. The same holds for
 * the `job.*` events of a queue with `events` on (JobEvents): published after the ack, never
 * awaited, so they never delay it.
 */
export class AfterSettle {
  constructor(private readonly options: AfterSettleOptions) {}

  ack(delivery: Delivery): void {
    delivery.source.ack(delivery.message);
    this.options.counts.acked();
  }

  /**
   * The end of a completion whose emits (and report) are confirmed: acknowledged, then its
   * payload deleted, then counted (and evented). The hot path: no allocation, no await (events off).
   */
  completed(delivery: Delivery, job: Job, emitted: number, seconds: number, report?: SettledReport): SettledResult {
    this.ack(delivery);
    this.options.payloads?.release(delivery.message.properties.headers);
    this.options.counts.completed(seconds, emitted);
    this.options.events?.completed(job, seconds);
    return report === undefined
      ? { kind: 'completed', settled: 'acked', job, emitted, seconds }
      : { kind: 'completed', settled: 'acked', job, emitted, seconds, report };
  }

  /** A handler (or an emit) failed: counted when it happens, whatever route follows. */
  failed(seconds: number | undefined, errorType: string, poison: boolean): void {
    if (seconds !== undefined) this.options.counts.failed(seconds, errorType);
    if (poison) this.options.counts.redelivered();
  }

  /**
   * After a route's ConfirmLoop: what it came to, counted, logged and evented.
   * @param failed the route follows a failed attempt (Settlement.fail), not a discard without one
   * @param report the report that tells of it (SettledResult)
   */
  settled(delivery: Delivery, route: Route, settled: Settled, failed = false, report?: SettledReport): SettledResult {
    const { log, counts, events } = this.options;
    const { message } = delivery;
    const event = route.result;
    switch (event.kind) {
      case 'dead-lettered':
        if (settled === 'abandoned') break;
        counts.deadLettered();
        log.warn('job dead-lettered', {
          ...(event.job ? fields(event.job, message) : { job_id: message.properties.messageId }),
          queue: delivery.queue,
          error_type: event.error.type,
          error: event.error.message,
          exhausted: event.exhausted,
          ...(settled === 'rejected' ? { route: 'broker dead-letter route' } : {}),
        });
        if (event.job === undefined) break;
        if (failed) events?.failed(event.job, event.error, false);
        events?.discarded(event.job, event.error, 'dead_letter');
        break;
      case 'discarded':
        log.warn('job discarded', {
          ...fields(event.job, message),
          error_type: event.error.type,
          error: event.error.message,
          exhausted: event.exhausted,
        });
        if (settled !== 'acked') break;
        this.options.payloads?.release(message.properties.headers);
        counts.discarded();
        if (failed) events?.failed(event.job, event.error, false);
        events?.discarded(event.job, event.error, 'discard');
        break;
      case 'cancelled':
        if (settled !== 'acked') break;
        this.options.payloads?.release(message.properties.headers);
        log.info(event.by === 'job' ? 'job cancelled' : 'job cancelled with its batch', fields(event.job, message));
        events?.cancelled(event.job);
        break;
      case 'retried':
        if (settled !== 'acked') break;
        counts.retried();
        log.info('job retry scheduled', {
          ...fields(event.job, message),
          next_attempt: event.nextAttempt,
          delay_ms: Math.round(event.delayMs),
          error_type: event.error.type,
          error: event.error.message,
        });
        events?.failed(event.job, event.error, true);
        break;
      case 'suspected':
        if (settled !== 'acked') break;
        counts.redelivered();
        log.warn('job redelivered after a crash; moved to the suspect queue to run alone', {
          ...fields(event.job, message),
          next_attempt: event.nextAttempt,
        });
        this.options.onSuspected();
        break;
      case 'parked':
        if (settled === 'acked')
          log.info(`job parked: its ${event.by} is paused`, { ...fields(event.job, message), return_queue: event.returnQueue });
        break;
      case 'handed-back':
        if (settled === 'acked') counts.handedBack();
        break;
      default:
        return assertNever(event);
    }
    return report === undefined ? { ...event, settled } : { ...event, settled, report };
  }
}

function fields(job: Job, message: Message): Record<string, unknown> {
  const trace = traceIdOf(message.properties.headers?.[OJS_HEADERS.traceparent]);
  return { job_id: job.id, job_type: job.type, tenant: job.tenant, attempt: job.attempt, trace_id: trace };
}
