import type { ConsumeMessage } from 'amqplib';
import type { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { JobRouter } from '../broker/job-router.js';
import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { PublishError } from '../errors/errors.js';
import { OJS_HEADERS, toWire, withoutBrokerHeaders } from '../job/amqp-mapping.js';
import { traceIdOf } from '../job/trace-context.js';
import type { HeaderValue, Job, JobError } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import { decideFailure } from '../retry/failure-decision.js';
import { resolveRetryPolicy } from '../retry/retry-policy.js';
import { delayRoutingKey } from '../topology/delay-topology.js';
import { BrokerNames } from '../topology/names.js';
import type { Settler } from './consumer-source.js';
import { DeadLetters, toJobError } from './dead-letters.js';

export interface FailureStats {
  retried: number;
  deadLettered: number;
  discarded: number;
}

export interface FailureHandlerOptions {
  config: CompiledConfig;
  /** The stage's input queue, resolved. */
  input: ResolvedQueueConfig;
  tenant: string | undefined;
  stage: string;
  publisher: ConfirmPublisher;
  router: JobRouter;
  log: Logger;
  stats: FailureStats;
  metrics: Pick<InstanceMetrics, 'retried' | 'deadLettered' | 'discarded' | 'acked'>;
}

/**
 * Settles failed deliveries by the job's retry policy: retried through the delay ladder,
 * dead-lettered, or discarded. Whatever happens, the failed delivery is acknowledged only
 * after its replacement (retry or dead letter) has been confirmed by the broker; if that
 * publish fails, the delivery is rejected to the queue's broker-side dead-letter route rather
 * than left to loop.
 */
export class FailureHandler {
  private readonly names: BrokerNames;
  private readonly deadLetters: DeadLetters;

  constructor(private readonly options: FailureHandlerOptions) {
    this.names = new BrokerNames(options.config.prefix);
    this.deadLetters = new DeadLetters(
      options.publisher,
      {
        exchange: this.names.dlx,
        routingKey: this.names.deadQueue(options.input.name, options.tenant),
        tenantHeader: options.config.tenantHeader,
      },
      options.stage,
    );
  }

  /**
   * Never throws: a failure to settle leaves the delivery to the broker.
   * @param queue the physical queue the delivery came from: a retry returns to it.
   */
  async fail(settler: Settler, message: ConsumeMessage, job: Job | undefined, thrown: unknown, queue: string): Promise<void> {
    const error = toJobError(thrown);
    try {
      if (job === undefined) {
        await this.deadLetter(message, undefined, error, queue);
      } else {
        const policy = resolveRetryPolicy(this.options.input, job.retry);
        const decision = decideFailure(policy, job.attempt, error, thrown);
        if (decision.action === 'retry') {
          await this.retry(message, job, decision.nextAttempt, delayRoutingKey(decision.delayMs, queue), error);
        } else if (decision.action === 'dead_letter') {
          await this.deadLetter(message, job, error, queue, decision.exhausted);
        } else {
          this.options.log.warn('job discarded', {
            ...fields(job, message),
            error_type: error.type,
            error: error.message,
            exhausted: decision.exhausted,
          });
          this.options.stats.discarded++;
          this.options.metrics.discarded();
        }
      }
      settler.ack(message);
      this.options.metrics.acked();
    } catch (err) {
      // Publishing the retry or dead letter failed. A lost channel is transient: the job goes
      // back to its queue. A refusal by the broker is not: rather than loop, the job takes the
      // queue's broker-side dead-letter route, which keeps it (without the reason).
      const transient = err instanceof PublishError && err.transient;
      this.options.log.warn(
        transient ? 'failed job not settled; handing it back' : 'failed job not settled; rejecting it to the broker dead-letter route',
        {
          queue,
          job_id: job?.id ?? message.properties.messageId,
          err: (err as Error).message,
        },
      );
      try {
        settler.nack(message, transient);
      } catch {
        // The channel is gone: the broker redelivers the message, which then counts as a crash.
      }
    }
  }

  /**
   * Hands a delivery that was prefetched but never started back to its queue, through the
   * ladder with no delay, so that it does not come back flagged as redelivered (which would
   * count as a crash).
   */
  async giveBack(settler: Settler, message: ConsumeMessage, queue: string): Promise<void> {
    try {
      await this.options.publisher.publish(this.names.retry, delayRoutingKey(0, queue), message.content, {
        ...message.properties,
        headers: cleanHeaders(message),
      });
      settler.ack(message);
    } catch {
      try {
        settler.nack(message, true);
      } catch {
        // Channel gone: the broker requeues it anyway.
      }
    }
  }

  /**
   * Moves a job redelivered from the main queue to the suspect queue, its crashed attempt
   * counted, without judging it: it may only have been prefetched by the process that died.
   */
  async suspect(settler: Settler, message: ConsumeMessage, job: Job, suspectQueue: string): Promise<void> {
    const error = { type: 'POISON', message: `attempt ${job.attempt} was redelivered: the process handling it died` };
    try {
      await this.retry(message, job, job.attempt + 1, delayRoutingKey(0, suspectQueue), error);
      settler.ack(message);
    } catch {
      try {
        settler.nack(message, true);
      } catch {
        // Channel gone: the broker redelivers it.
      }
    }
  }

  private async retry(message: ConsumeMessage, job: Job, nextAttempt: number, routingKey: string, error: JobError): Promise<void> {
    const retried: Job = { ...job, attempt: nextAttempt, meta: { ...job.meta, last_error: { type: error.type, message: error.message } } };
    delete retried.error;
    const headers = cleanHeaders(message);
    const traceparent = headers[OJS_HEADERS.traceparent];
    const wire = toWire(retried, {
      tenantHeader: this.options.config.tenantHeader,
      headers,
      ...(typeof traceparent === 'string' ? { traceparent } : {}),
    });
    // A per-message TTL would expire the job inside a delay queue and skip the rest of its wait.
    delete wire.options.expiration;
    await this.options.publisher.publish(this.names.retry, routingKey, wire.content, wire.options);
    this.options.stats.retried++;
    this.options.metrics.retried();
    this.options.log.info('job retry scheduled', {
      ...fields(job, message),
      next_attempt: nextAttempt,
      route: routingKey,
      error_type: error.type,
      error: error.message,
    });
  }

  private async deadLetter(
    message: ConsumeMessage,
    job: Job | undefined,
    error: JobError,
    queue: string,
    exhausted = false,
  ): Promise<void> {
    const target = this.options.input.dead_letter_queue;
    this.options.log.warn('job dead-lettered', {
      ...(job ? fields(job, message) : { job_id: message.properties.messageId }),
      queue,
      error_type: error.type,
      error: error.message,
      exhausted,
      ...(target === undefined ? {} : { dead_letter_queue: target }),
    });
    if (job && target !== undefined) {
      // OJS dead_letter_queue: the job is enqueued, error and all, to the configured queue.
      const dead: Job = {
        ...job,
        queue: target,
        error,
        meta: { ...job.meta, original_queue: job.queue, dead_lettered_at: new Date().toISOString(), stage: this.options.stage },
      };
      await this.options.router.send(dead, { headers: cleanHeaders(message) });
    } else {
      await this.deadLetters.send(message, job, error);
    }
    this.options.stats.deadLettered++;
    this.options.metrics.deadLettered();
  }
}

function cleanHeaders(message: ConsumeMessage): Record<string, HeaderValue> {
  return withoutBrokerHeaders(message.properties.headers);
}

function fields(job: Job, message: ConsumeMessage): Record<string, unknown> {
  const trace = traceIdOf(message.properties.headers?.[OJS_HEADERS.traceparent]);
  return { job_id: job.id, job_type: job.type, tenant: job.tenant, attempt: job.attempt, trace_id: trace };
}
