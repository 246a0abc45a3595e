import { expect } from 'chai';
import type { Message } from 'amqplib';
import { routeFor } from '../../src/broker/job-router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { queueFor } from '../../src/config/queue-resolver.js';
import { NonRetryableError } from '../../src/errors/errors.js';
import { OJS_HEADERS, toWire } from '../../src/job/amqp-mapping.js';
import { createJob } from '../../src/job/envelope.js';
import { toJobError } from '../../src/job/job-error.js';
import type { Job } from '../../src/job/job.types.js';
import { DiscardJob } from '../../src/retry/handler-outcomes.js';
import type { ConsumerSource } from '../../src/runner/channels/consumer-source.js';
import type { Delivery, InputKind } from '../../src/runner/channels/delivery.js';
import type { Route, RouteContext } from '../../src/runner/settle/settlement-route.types.js';
import {
  cancelRoute,
  deadLetterHereRoute,
  deadLetterRoute,
  discardRoute,
  failureRoute,
  handBackRoute,
  parkRoute,
  retryRoute,
  suspectRoute,
} from '../../src/runner/settle/settlement-route-builders.js';
import { delayRoutingKey } from '../../src/topology/delay-topology.js';
import { BrokerNames } from '../../src/topology/names.js';

const config: CompiledConfig = compileConfig({
  queues: {
    _default: { scope: 'shared' },
    incoming: { default_retry: { max_attempts: 3, initial_interval: 'PT2S', backoff_coefficient: 2, jitter: false } },
    guarded: { default_retry: { max_attempts: 2, jitter: false }, dead_letter_queue: 'graveyard' },
    careless: { default_retry: { max_attempts: 1, on_exhaustion: 'discard' } },
    graveyard: {},
  },
});
const names = new BrokerNames(config.prefix);
const TRACEPARENT = '00-0af7651916cd43dd8445eb211c80319c-b7ad6b7169203331-01';

function contextOf(input: string, tenant?: string): RouteContext {
  return {
    config,
    names,
    stage: 'converter',
    queues: { due: names.dueQueue(input), suspect: names.suspectQueue(input), dead: names.deadQueue(input) },
    origin: { queue: names.queue(input), tenant, variant: undefined },
  };
}

/** A delivery as the broker hands it over, with an `x-death` header from the delay ladder; no channel (a builder never settles). */
function deliveryOf(job: Job, input: InputKind = 'main'): Delivery {
  const wire = toWire(job, { tenantHeader: config.tenantHeader, traceparent: TRACEPARENT });
  const message = {
    fields: { deliveryTag: 1, redelivered: false, exchange: '', routingKey: job.queue },
    properties: {
      ...wire.options,
      headers: { ...wire.options.headers, 'x-death': [{ queue: names.delayLevel(0), reason: 'expired', count: 1 }] },
    },
    content: wire.content,
  } as unknown as Message;
  return { message, source: {} as ConsumerSource, input, queue: job.queue };
}

const newJob = (queue: string, over: Partial<Job> = {}): Job => ({
  ...createJob({ type: 'doc.convert', args: ['a.pdf'] }, { queue }),
  ...over,
});
const bodyOf = (route: Route): Record<string, unknown> =>
  JSON.parse((route.message as { content: Buffer }).content.toString('utf8')) as Record<string, unknown>;
const headersOf = (route: Route): Record<string, unknown> => ({ ...route.message?.options.headers });
const error = { type: 'HANDLER_ERROR', message: 'boom' };

describe('settlement routes (pure builders)', () => {
  const ctx = contextOf('incoming');

  it('retry: the job at the next attempt, its last error in meta, through the retry exchange delayed to due; a refusal is waited out', () => {
    const job = newJob('incoming', { attempt: 1 });
    const delivery = deliveryOf(job);
    const route = retryRoute(ctx, delivery, job, 2, 4000, error);
    expect(route.what).to.equal('retry');
    expect(route.message?.exchange).to.equal(names.retry);
    expect(route.message?.routingKey).to.equal(delayRoutingKey(4000, ctx.queues.due));
    const body = bodyOf(route);
    expect(body.id).to.equal(job.id);
    expect(body.attempt).to.equal(2);
    expect(body.error).to.equal(undefined);
    expect((body.meta as Record<string, unknown>).last_error).to.deep.equal(error);
    expect(headersOf(route)).to.not.have.property('x-death');
    expect(headersOf(route)[OJS_HEADERS.traceparent]).to.equal(TRACEPARENT);
    expect(route.message?.options.expiration).to.equal(undefined);
    expect(route.refusal).to.deep.equal({ kind: 'wait' });
    expect(route.result).to.deep.equal({ kind: 'retried', job, nextAttempt: 2, delayMs: 4000, error });
  });

  it('retry of a delivery from the suspect queue goes back to the suspect queue', () => {
    const job = newJob('incoming');
    const route = retryRoute(ctx, deliveryOf(job, 'suspect'), job, 2, 0, error);
    expect(route.message?.routingKey).to.equal(delayRoutingKey(0, ctx.queues.suspect));
  });

  it('suspect: at attempt + 1, with a REDELIVERED reason, without delay to the suspect queue; a refusal is waited out', () => {
    const job = newJob('incoming', { attempt: 2 });
    const route = suspectRoute(ctx, deliveryOf(job, 'due'), job);
    expect(route.what).to.equal('suspect');
    expect(route.message?.exchange).to.equal(names.retry);
    expect(route.message?.routingKey).to.equal(delayRoutingKey(0, ctx.queues.suspect));
    expect(bodyOf(route).attempt).to.equal(3);
    expect((bodyOf(route).meta as { last_error: { type: string } }).last_error.type).to.equal('REDELIVERED');
    expect(route.refusal).to.deep.equal({ kind: 'wait' });
    expect(route.result).to.include({ kind: 'suspected', nextAttempt: 3 });
  });

  it('hand-back: the message byte for byte, without broker headers, without delay to due; a refusal is waited out', () => {
    const job = newJob('incoming');
    const delivery = deliveryOf(job);
    const route = handBackRoute(ctx, delivery);
    expect(route.what).to.equal('hand-back');
    expect(route.message?.exchange).to.equal(names.retry);
    expect(route.message?.routingKey).to.equal(delayRoutingKey(0, ctx.queues.due));
    expect(route.message?.content).to.equal(delivery.message.content);
    expect(headersOf(route)).to.not.have.property('x-death');
    expect(route.message?.options.messageId).to.equal(job.id);
    expect(route.refusal).to.deep.equal({ kind: 'wait' });
    expect(route.result).to.deep.equal({ kind: 'handed-back' });
  });

  it('park: byte for byte through the park exchange, keyed by tenant, with who paused it and where it returns; same attempt; a refusal is waited out', () => {
    const job = newJob('incoming', { tenant: 'acme', attempt: 2 });
    const delivery = deliveryOf(job, 'suspect');
    const route = parkRoute(ctx, delivery, job, 'batch');
    expect(route.message?.exchange).to.equal(names.park);
    expect(route.message?.routingKey).to.equal('acme');
    expect(route.message?.content).to.equal(delivery.message.content);
    expect(headersOf(route)[OJS_HEADERS.parkedBy]).to.equal('batch');
    expect(headersOf(route)[OJS_HEADERS.parkedReturn]).to.equal(ctx.queues.suspect);
    expect(headersOf(route)).to.not.have.property('x-death');
    expect(route.refusal).to.deep.equal({ kind: 'wait' });
    expect(route.result).to.deep.equal({ kind: 'parked', job, by: 'batch', returnQueue: ctx.queues.suspect });
    expect(parkRoute(ctx, deliveryOf(newJob('incoming')), newJob('incoming'), 'tenant').message?.routingKey).to.equal('_');
  });

  it('discard and cancel: nothing replaces the delivery', () => {
    const job = newJob('incoming');
    expect(discardRoute(job, error, true)).to.deep.include({ message: undefined, refusal: { kind: 'reject' } });
    expect(discardRoute(job, error, true).result).to.deep.equal({ kind: 'discarded', job, error, exhausted: true });
    expect(cancelRoute(job, 'batch')).to.deep.include({ message: undefined, result: { kind: 'cancelled', job, by: 'batch' } });
  });

  it('dead letter here: to the dead-letter exchange, routed to the own dead queue, error and origin aboard; a refusal is waited out', () => {
    const job = newJob('incoming', { tenant: 'acme' });
    const route = deadLetterHereRoute(contextOf('incoming', 'acme'), deliveryOf(job), job, error, true);
    expect(route.message?.exchange).to.equal(names.dlx);
    expect(route.message?.routingKey).to.equal(names.deadQueue('incoming'));
    expect(bodyOf(route).error).to.deep.equal(error);
    expect((bodyOf(route).meta as Record<string, unknown>).stage).to.equal('converter');
    expect(headersOf(route)[OJS_HEADERS.originQueue]).to.equal(names.queue('incoming'));
    expect(headersOf(route)[OJS_HEADERS.originTenant]).to.equal('acme');
    expect(headersOf(route)).to.not.have.property('x-death');
    expect(route.message?.options.expiration).to.equal(undefined);
    expect(route.refusal).to.deep.equal({ kind: 'wait' });
    expect(route.result).to.deep.equal({ kind: 'dead-lettered', job, error, exhausted: true });
  });

  it('dead letter of a body that is not a job: byte for byte, the reason in headers', () => {
    const delivery = deliveryOf(newJob('incoming'));
    const route = deadLetterHereRoute(ctx, delivery, undefined, { type: 'INVALID_PAYLOAD', message: 'not json' }, false);
    expect(route.message?.content).to.equal(delivery.message.content);
    expect(headersOf(route)[OJS_HEADERS.errorType]).to.equal('INVALID_PAYLOAD');
  });

  it('dead letter with a dead_letter_queue: the job enqueued there, error and all; refused, it falls back to the own dead letters', () => {
    const ctx = contextOf('guarded');
    const job = newJob('guarded');
    const route = deadLetterRoute(ctx, queueFor(config, 'guarded'), deliveryOf(job), job, error, true);
    const expected = routeFor(config, { ...job, queue: 'graveyard' });
    expect(route.message?.exchange).to.equal(expected.exchange);
    expect(route.message?.routingKey).to.equal(expected.routingKey);
    expect(bodyOf(route).queue).to.equal('graveyard');
    expect(bodyOf(route).error).to.deep.equal(error);
    expect((bodyOf(route).meta as Record<string, unknown>).original_queue).to.equal('guarded');
    expect(headersOf(route)[OJS_HEADERS.originQueue]).to.equal(names.queue('guarded'));
    expect(route.refusal.kind).to.equal('fallback');
    const fallback = (route.refusal as { route: () => Route }).route();
    expect(fallback.message?.exchange).to.equal(names.dlx);
    expect(fallback.message?.routingKey).to.equal(names.deadQueue('guarded'));
    expect(fallback.refusal).to.deep.equal({ kind: 'wait' });
    expect(route.result).to.deep.equal(fallback.result);
  });

  it('dead letter of a job refused at admission, or without a dead_letter_queue, stays in the dead letters of its queue', () => {
    const guarded = contextOf('guarded');
    const job = newJob('guarded');
    const refused = deadLetterRoute(
      guarded,
      queueFor(config, 'guarded'),
      deliveryOf(job),
      job,
      { type: 'TENANT_MISMATCH', message: 'no' },
      false,
    );
    expect(refused.message?.exchange).to.equal(names.dlx);
    expect(refused.refusal).to.deep.equal({ kind: 'wait' });
    const plain = deadLetterRoute(ctx, queueFor(config, 'incoming'), deliveryOf(newJob('incoming')), newJob('incoming'), error, true);
    expect(plain.message?.routingKey).to.equal(names.deadQueue('incoming'));
  });

  it('a failure is routed by the retry policy: retry while attempts remain, then dead letter, or discard', () => {
    const incoming = queueFor(config, 'incoming');
    const first = newJob('incoming', { attempt: 1 });
    const retry = failureRoute(ctx, incoming, deliveryOf(first), first, error, new Error('boom'));
    expect(retry.result).to.deep.include({ kind: 'retried', nextAttempt: 2, delayMs: 2000 });
    const last = newJob('incoming', { attempt: 3 });
    expect(failureRoute(ctx, incoming, deliveryOf(last), last, error, new Error('boom')).result).to.deep.include({
      kind: 'dead-lettered',
      exhausted: true,
    });
    const careless = newJob('careless', { attempt: 1 });
    expect(
      failureRoute(contextOf('careless'), queueFor(config, 'careless'), deliveryOf(careless), careless, error, new Error('x')).result.kind,
    ).to.equal('discarded');
    const discard = new DiscardJob('not wanted');
    expect(failureRoute(ctx, incoming, deliveryOf(first), first, toJobError(discard), discard).result.kind).to.equal('discarded');
    const fatal = new NonRetryableError('no');
    expect(failureRoute(ctx, incoming, deliveryOf(first), first, toJobError(fatal), fatal).result).to.deep.include({
      kind: 'dead-lettered',
    });
  });
});
