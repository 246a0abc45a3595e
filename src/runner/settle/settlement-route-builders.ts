import type { Message } from 'amqplib';
import { routeFor } from '../../broker/job-router.js';
import type { ResolvedQueueConfig } from '../../config/config.types.js';
import { OJS_HEADERS, toWire, withoutBrokerHeaders, type WireMessage } from '../../job/amqp-mapping.js';
import type { Job, JobError } from '../../job/job.types.js';
import { decideFailure } from '../../retry/failure-decision.js';
import { resolveRetryPolicy } from '../../retry/retry-policy.js';
import { delayRoutingKey } from '../../topology/delay-topology.js';
import { parkKey } from '../../topology/names.js';
import { boundedError, fittedHeaders } from './dead-letter-bounds.js';
import { deadLetterMessage, jobDeadLetter, originHeaders } from './dead-letters.js';
import type { Delivery } from '../channels/delivery.js';
import type { Route, RouteContext } from './settlement-route.types.js';
import { assertNever } from './settlement-result.js';

/*
 * The settlement routes, one pure builder each: what replaces the delivery (exchange, routing
 * key, content, options) and what a refusal of it leads to. Nothing here publishes, acks or
 * counts; the ConfirmLoop carries a route out, the after-settle hook observes it.
 *
 * Retries and hand-backs go to the instance's `due` queue (or back to `suspect`), never to the
 * main queue: a job admitted once is never refused for `max_size`, and the broker never
 * dead-letters into a full queue (where `reject-publish` drops it silently).
 *
 * So every queue a settlement publishes to cannot refuse for room (`due` and `suspect` are
 * unbounded, dead letters drop their head, parked jobs are unbounded), but for a configured
 * `dead_letter_queue`. A refusal there means the queue has no leader for a moment (a quorum queue
 * electing one after its node went down): it is waited out (SettlementOptions.refusalWaitsMs),
 * and only past every wait is the delivery rejected to its dead-letter route. Rejected at once, a
 * failover turned retries into dead letters (cluster.test.ts).
 */

const REJECT = { kind: 'reject' } as const;
const WAIT = { kind: 'wait' } as const;

/** Error types of jobs refused before their handler ran: their content is not to be trusted. */
const REFUSED_AT_ADMISSION = new Set(['INVALID_PAYLOAD', 'TENANT_MISMATCH']);

/** A delivery from the suspect queue stays a suspect; anything else returns by `due`. */
export function returnQueue(ctx: RouteContext, delivery: Delivery): string {
  return delivery.input === 'suspect' ? ctx.queues.suspect : ctx.queues.due;
}

/** A failed job that has attempts left: at `nextAttempt`, through the delay ladder, back to `due` (or `suspect`). */
export function retryRoute(ctx: RouteContext, delivery: Delivery, job: Job, nextAttempt: number, delayMs: number, error: JobError): Route {
  const wire = retried(ctx, delivery.message, job, nextAttempt, error);
  const routingKey = delayRoutingKey(delayMs, returnQueue(ctx, delivery));
  return {
    what: 'retry',
    message: { exchange: ctx.names.retry, routingKey, content: wire.content, options: wire.options },
    refusal: WAIT,
    result: { kind: 'retried', job, nextAttempt, delayMs, error },
  };
}

/**
 * A job redelivered from `main` or `due`, moved to the suspect queue, its crashed attempt
 * counted, without judging it: the process that died may only have prefetched it. A refusal is
 * waited out (see SettlementOptions.refusalWaitsMs), as is a suspect queue declared on first use
 * that could not be declared (`prepare`).
 */
export function suspectRoute(ctx: RouteContext, delivery: Delivery, job: Job): Route {
  const error = { type: 'REDELIVERED', message: `attempt ${job.attempt} came back after the process or channel handling it died` };
  const wire = retried(ctx, delivery.message, job, job.attempt + 1, error);
  return {
    what: 'suspect',
    message: {
      exchange: ctx.names.retry,
      routingKey: delayRoutingKey(0, ctx.queues.suspect),
      content: wire.content,
      options: wire.options,
    },
    refusal: WAIT,
    result: { kind: 'suspected', job, nextAttempt: job.attempt + 1, error },
    // Its only writer is this runner: a queue declared on first use is declared now (SuspectDeclaration).
    ...(ctx.ensureSuspect === undefined ? {} : { prepare: ctx.ensureSuspect }),
  };
}

/**
 * A delivery prefetched but never started, handed back unflagged (no requeue: a requeued
 * delivery comes back `redelivered`, which reads as a crash), through the ladder with no delay,
 * to `due` (or back to `suspect`): another instance, or this one later, takes it as a first delivery.
 * With `delayMs`, a job its handler found rate limited downstream, back after that wait, same attempt.
 */
export function handBackRoute(ctx: RouteContext, delivery: Delivery, delayMs = 0): Route {
  const { message } = delivery;
  return {
    what: 'hand-back',
    message: {
      exchange: ctx.names.retry,
      routingKey: delayRoutingKey(delayMs, returnQueue(ctx, delivery)),
      content: message.content,
      options: { ...message.properties, headers: withoutBrokerHeaders(message.properties.headers) },
    },
    refusal: WAIT,
    result: { kind: 'handed-back' },
  };
}

/**
 * A job of a paused tenant or batch, met before it ran: moved unrun, byte for byte, to the
 * parked queue (through `<prefix>.park`, routing key its tenant), with the queue `resume` sends
 * it back to: this instance's `due` (or `suspect`), as a hand-back would. Same attempt: parking
 * is not a try.
 */
export function parkRoute(ctx: RouteContext, delivery: Delivery, job: Job, by: 'tenant' | 'batch'): Route {
  const { message } = delivery;
  const back = returnQueue(ctx, delivery);
  const headers = { ...withoutBrokerHeaders(message.properties.headers), [OJS_HEADERS.parkedBy]: by, [OJS_HEADERS.parkedReturn]: back };
  return {
    what: 'park',
    message: {
      exchange: ctx.names.park,
      routingKey: parkKey(job.tenant),
      content: message.content,
      options: { ...message.properties, headers },
    },
    refusal: WAIT,
    result: { kind: 'parked', job, by, returnQueue: back },
  };
}

/** A job discarded on purpose (OJS discard): replaced by nothing, only acknowledged. */
export function discardRoute(job: Job, error: JobError, exhausted: boolean): Route {
  return { what: 'discard report', message: undefined, refusal: REJECT, result: { kind: 'discarded', job, error, exhausted } };
}

/** A cancelled job, or a job of a cancelled batch, met before it ran: replaced by nothing, only acknowledged. */
export function cancelRoute(job: Job, by: 'batch' | 'job'): Route {
  return { what: 'cancel report', message: undefined, refusal: REJECT, result: { kind: 'cancelled', job, by } };
}

/**
 * A dead letter to the queue's own dead letters, through the dead-letter exchange: a job keeps
 * its envelope and gains the error; a body that is not a job goes byte for byte, the reason in
 * headers (see deadLetterMessage). A refusal is waited out, then rejects the delivery to the broker's route.
 */
export function deadLetterHereRoute(
  ctx: RouteContext,
  delivery: Delivery,
  job: Job | undefined,
  error: JobError,
  exhausted: boolean,
): Route {
  const wire = deadLetterMessage(delivery.message, job, error, ctx.stage, ctx.config.tenantHeader, ctx.origin);
  return {
    what: 'dead letter',
    message: { exchange: ctx.names.dlx, routingKey: ctx.queues.dead, content: wire.content, options: wire.options },
    refusal: WAIT,
    result: { kind: 'dead-lettered', job, error, exhausted },
  };
}

/**
 * A dead letter to the queue's `dead_letter_queue` (OJS core spec, dead letter: the job is
 * enqueued, error and all, to the configured queue); refused there (full), the dead letters of
 * its own queue keep it. A job refused at admission (a tenant or type it may not carry here)
 * never ran: its claim is not to be trusted, so it stays in the dead letters of the queue it was
 * found in, as does any job when no `dead_letter_queue` is set or it cannot take the job.
 */
export function deadLetterRoute(
  ctx: RouteContext,
  input: ResolvedQueueConfig,
  delivery: Delivery,
  job: Job | undefined,
  error: JobError,
  exhausted: boolean,
): Route {
  // Built only when taken: the common case (the configured queue takes it) never serializes it.
  const here = (): Route => deadLetterHereRoute(ctx, delivery, job, error, exhausted);
  const target = input.dead_letter_queue;
  if (job === undefined || target === undefined || REFUSED_AT_ADMISSION.has(error.type)) return here();
  try {
    const moved: Job = { ...job, queue: target, meta: { ...job.meta, original_queue: job.queue } };
    const route = routeFor(ctx.config, moved);
    const headers = { ...fittedHeaders(withoutBrokerHeaders(delivery.message.properties.headers)), ...originHeaders(ctx.origin) };
    const wire = jobDeadLetter(moved, boundedError(error), ctx.stage, ctx.config.tenantHeader, headers, new Date().toISOString());
    return {
      what: 'dead letter',
      message: { exchange: route.exchange, routingKey: route.routingKey, content: wire.content, options: wire.options },
      refusal: { kind: 'fallback', route: here },
      result: { kind: 'dead-lettered', job, error, exhausted },
    };
  } catch (err) {
    // The configured queue cannot take it (a type it does not allow): its own dead letters can.
    return { ...here(), detour: { reason: (err as Error).message, target } };
  }
}

/** A failed job (thrown, or refused by an emit), routed by its retry policy: retry, dead letter or discard. */
export function failureRoute(
  ctx: RouteContext,
  input: ResolvedQueueConfig,
  delivery: Delivery,
  job: Job,
  error: JobError,
  thrown: unknown,
): Route {
  const decision = decideFailure(resolveRetryPolicy(input, job.retry), job.attempt, error, thrown);
  switch (decision.kind) {
    case 'retried':
      return retryRoute(ctx, delivery, job, decision.nextAttempt, decision.delayMs, error);
    case 'dead-lettered':
      return deadLetterRoute(ctx, input, delivery, job, error, decision.exhausted);
    case 'discarded':
      return discardRoute(job, error, decision.exhausted);
    default:
      return assertNever(decision);
  }
}

/** The job again, at `nextAttempt`, with the reason it comes back. */
function retried(ctx: RouteContext, message: Message, job: Job, nextAttempt: number, error: JobError): WireMessage {
  const last = boundedError({ type: error.type, message: error.message });
  const again: Job = { ...job, attempt: nextAttempt, meta: { ...job.meta, last_error: last } };
  delete again.error;
  const headers = withoutBrokerHeaders(message.properties.headers);
  const traceparent = headers[OJS_HEADERS.traceparent];
  const wire = toWire(again, {
    tenantHeader: ctx.config.tenantHeader,
    headers,
    ...(typeof traceparent === 'string' ? { traceparent } : {}),
  });
  // A per-message TTL would expire the job inside a delay queue and skip the rest of its wait.
  delete wire.options.expiration;
  return wire;
}
