import { expect } from 'chai';
import type { Channel, Message, Options } from 'amqplib';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import type { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import type { JobSink } from '../../src/broker/job-router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { queueFor } from '../../src/config/queue-resolver.js';
import { NonRetryableError, PublishError, StagecoachError, TenantMismatchError } from '../../src/errors/errors.js';
import { parseRecords } from '../../src/tracking-stream/tracking-report.js';
import { OJS_HEADERS, toWire } from '../../src/job/amqp-mapping.js';
import { createJob } from '../../src/job/envelope.js';
import type { Job } from '../../src/job/job.types.js';
import type { Logger } from '../../src/logging/logger.js';
import type { InstanceMetrics } from '../../src/observability/stage-metrics.js';
import { DiscardJob } from '../../src/retry/handler-outcomes.js';
import type { ChannelSupervisor } from '../../src/runner/channels/channel-supervisor.js';
import { ConsumerSource } from '../../src/runner/channels/consumer-source.js';
import type { Delivery, InputKind, SettlementInput } from '../../src/runner/channels/delivery.js';
import { emptyStats, type StageRunnerStats } from '../../src/runner/settle/runner-stats.js';
import { Settlement, type Settled } from '../../src/runner/settle/settlement.js';
import { SuspectDeclaration } from '../../src/runner/intake/suspect-declaration.js';
import { JobContext } from '../../src/stage/job-context.js';
import { delayRoutingKey } from '../../src/topology/delay-topology.js';
import { BrokerNames } from '../../src/topology/names.js';

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;

const config: CompiledConfig = compileConfig({
  queues: {
    // Tracking off: these cases are about the broker side; tracked settlements have their own below.
    _default: { scope: 'shared', tracking: false },
    incoming: { default_retry: { max_attempts: 3, initial_interval: 'PT2S', backoff_coefficient: 2, jitter: false } },
    guarded: { default_retry: { max_attempts: 2, jitter: false }, dead_letter_queue: 'graveyard' },
    careless: { default_retry: { max_attempts: 1, on_exhaustion: 'discard' } },
    graveyard: {},
    tracked: { tracking: true, default_retry: { max_attempts: 3, initial_interval: 'PT1S', jitter: false } },
  },
});
const names = new BrokerNames(config.prefix);
const queuesOf = (input: string) => ({
  main: names.queue(input),
  due: names.dueQueue(input),
  suspect: names.suspectQueue(input),
  dead: names.deadQueue(input),
});

interface Published {
  exchange: string;
  routingKey: string;
  content: Buffer;
  body: Record<string, unknown>;
  headers: Record<string, unknown>;
  options: Options.Publish;
}

/**
 * A ConfirmPublisher as the settlement uses it: publish() records what it was given and resolves
 * (`ok`), fails as a lost channel (`lost`: transient PublishError), is refused by the broker
 * (`refuse`: permanent PublishError), or waits for the test (`manual`). `plan` overrides the
 * mode for the next publishes, one entry each.
 */
class FakePublisher {
  readonly published: Published[] = [];
  readonly confirms: Array<{ confirm: () => void; fail: (err: Error) => void }> = [];
  plan: Array<'ok' | 'lost' | 'refuse' | 'manual'> = [];

  constructor(
    readonly name: string,
    private readonly mode: 'ok' | 'lost' | 'refuse' | 'manual' = 'ok',
  ) {}

  publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void> {
    this.published.push({
      exchange,
      routingKey,
      content,
      body: JSON.parse(content.toString('utf8')) as Record<string, unknown>,
      headers: { ...options.headers },
      options,
    });
    switch (this.plan.shift() ?? this.mode) {
      case 'ok':
        return Promise.resolve();
      case 'lost':
        return Promise.reject(new PublishError(`${this.name}: channel closed`, exchange, routingKey, true));
      case 'refuse':
        return Promise.reject(new PublishError(`${this.name}: message nacked (queue full)`, exchange, routingKey, false));
      case 'manual':
        return new Promise<void>((confirm, fail) => this.confirms.push({ confirm, fail }));
    }
  }
}

/**
 * The publisher supervisor as the settlement uses it: `ready(stale)` answers with the current
 * publisher unless it is the stale one, else waits for `heal()`; `lose()` rejects the waiters
 * (the connection is gone). Every call is recorded with its stale argument.
 */
class FakePublishers {
  readonly readyCalls: Array<FakePublisher | undefined> = [];
  private waiters: Array<{ stale: FakePublisher | undefined; resolve: (p: FakePublisher) => void; reject: (err: Error) => void }> = [];
  gone: Error | undefined;

  constructor(public current: FakePublisher | undefined) {}

  ready(stale?: FakePublisher): Promise<FakePublisher> {
    this.readyCalls.push(stale);
    if (this.gone) return Promise.reject(this.gone);
    const current = this.current;
    if (current !== undefined && current !== stale) return Promise.resolve(current);
    return new Promise((resolve, reject) => this.waiters.push({ stale, resolve, reject }));
  }

  get waiting(): number {
    return this.waiters.length;
  }

  heal(publisher: FakePublisher): void {
    this.current = publisher;
    for (const waiter of this.waiters.splice(0)) {
      if (waiter.stale === publisher) this.waiters.push(waiter);
      else waiter.resolve(publisher);
    }
  }

  lose(err = new Error('publisher channel lost with its connection')): void {
    this.gone = err;
    this.current = undefined;
    for (const waiter of this.waiters.splice(0)) waiter.reject(err);
  }

  asSupervisor(): ChannelSupervisor<ConfirmPublisher> {
    return this as unknown as ChannelSupervisor<ConfirmPublisher>;
  }
}

/** The channel a delivery came on: the two calls ConsumerSource settles with, recorded. */
class RecordingChannel {
  readonly calls: Array<{ op: 'ack' | 'nack'; tag: number; allUpTo: boolean; requeue?: boolean }> = [];

  ack(message: Message, allUpTo = false): void {
    this.calls.push({ op: 'ack', tag: message.fields.deliveryTag, allUpTo });
  }

  nack(message: Message, allUpTo = false, requeue = true): void {
    this.calls.push({ op: 'nack', tag: message.fields.deliveryTag, allUpTo, requeue });
  }
}

/** Counts every InstanceMetrics call by name. */
function recordingMetrics(): { metrics: InstanceMetrics; counts: Record<string, number> } {
  const counts: Record<string, number> = {};
  const count = (name: string) => () => void (counts[name] = (counts[name] ?? 0) + 1);
  const metrics: InstanceMetrics = {
    consumed: count('consumed'),
    completed: count('completed'),
    failed: count('failed'),
    retried: count('retried'),
    deadLettered: count('deadLettered'),
    discarded: count('discarded'),
    published: count('published'),
    acked: count('acked'),
  };
  return { metrics, counts };
}

/** A JobSink whose every send() returns a promise the test settles. */
class ControlledSink implements JobSink {
  readonly sent: Array<{ job: Job; confirm: () => void; refuse: (err: Error) => void }> = [];

  send(job: Job): Promise<void> {
    return new Promise<void>((resolve, reject) => this.sent.push({ job, confirm: resolve, refuse: reject }));
  }
}

/** Lets the batched acknowledgements of the current turn go out. */
/** The context of a job of a tracked queue (it lists its children) whose handler returned `result`. */
function trackedContext(job: Job, result: unknown): JobContext {
  const ctx = new JobContext('converter', ['converted'], job, {}, new ControlledSink(), silent, undefined, undefined, undefined, [], true);
  ctx.result = result;
  return ctx;
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Resolves with what `promise` settled to, or 'pending' if it has not settled by the next macrotask. */
async function state(promise: Promise<unknown>): Promise<unknown> {
  let result: unknown = 'pending';
  promise.then(
    (value) => (result = value),
    (err: unknown) => (result = { err }),
  );
  await nextTurn();
  return result;
}

const TRACEPARENT = '00-0af7651916cd43dd8445eb211c80319c-b7ad6b7169203331-01';

/**
 * One settlement of a stage reading `input`, with its own recording channel, publisher and
 * counters. `deliver()` makes a delivery of a job (as the broker would hand it over, with an
 * `x-death` header from the delay ladder) on that channel.
 */
function setup(
  input = 'incoming',
  publisher: FakePublisher = new FakePublisher('p1'),
  tenant?: string,
  refusalWaitsMs: number[] = [],
  ensureSuspect?: () => Promise<void>,
) {
  const channel = new RecordingChannel();
  const source = new ConsumerSource(channel as unknown as Channel);
  const publishers = new FakePublishers(publisher);
  const stats: StageRunnerStats = emptyStats();
  const { metrics, counts } = recordingMetrics();
  const queues = queuesOf(input);
  let suspected = 0;
  const settlement = new Settlement({
    config,
    input: queueFor(config, input),
    stage: 'converter',
    queues: { due: queues.due, suspect: queues.suspect, dead: queues.dead },
    origin: { queue: queues.main, tenant, variant: undefined },
    publishers: publishers.asSupervisor(),
    log: silent,
    stats,
    metrics,
    onSuspected: () => suspected++,
    // Refused suspect copies are tried again after waits in production; here not, unless asked.
    refusalWaitsMs,
    ensureSuspect,
  });
  let tag = 0;
  const deliver = (job: Job, kind: InputKind = 'main'): Delivery => {
    const wire = toWire(job, { tenantHeader: config.tenantHeader, traceparent: TRACEPARENT });
    const message = {
      fields: { deliveryTag: ++tag, redelivered: false, exchange: '', routingKey: queues[kind] },
      properties: {
        ...wire.options,
        headers: { ...wire.options.headers, 'x-death': [{ queue: names.delayLevel(0), reason: 'expired', count: 1 }] },
      },
      content: wire.content,
    } as unknown as Message;
    source.delivered(message);
    return { message, source, input: kind, queue: queues[kind] };
  };
  const newJob = (over: Partial<Job> = {}): Job => ({ ...createJob({ type: 'doc.convert', args: ['a.pdf'] }, { queue: input }), ...over });
  const context = (job: Job, sink: JobSink = new ControlledSink()): JobContext =>
    new JobContext('converter', ['converted'], job, {}, sink, silent, undefined);
  return {
    settlement,
    channel,
    source,
    publishers,
    stats,
    counts,
    queues,
    deliver,
    newJob,
    context,
    suspected: () => suspected,
  };
}

/** The settlement's acks and rejects, once the batched acks of the turn went out. */
async function settledOps(channel: RecordingChannel): Promise<RecordingChannel['calls']> {
  await nextTurn();
  return channel.calls;
}

/** Asserts that `ctx` is closed: an emit now is refused and reaches no sink. */
async function expectClosed(ctx: JobContext): Promise<void> {
  const err = await ctx.emit('converted', { type: 'late' }).then(
    () => expect.fail('an emit after the settlement was accepted'),
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(StagecoachError);
  expect((err as StagecoachError).code).to.equal('INVALID_REQUEST');
}

const ack = (tag: number) => ({ op: 'ack', tag, allUpTo: true });
const reject = (tag: number) => ({ op: 'nack', tag, allUpTo: false, requeue: false });

describe('Settlement', () => {
  describe('completed', () => {
    it('settles the context, then acks: never before every emit is confirmed', async () => {
      const t = setup();
      const job = t.newJob();
      const delivery = t.deliver(job);
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      void ctx.emit('converted', { type: 'doc.converted' });
      const settled = t.settlement.settle(delivery, { kind: 'completed', job, ctx, seconds: 0.5 });
      sink.sent[0].confirm();
      expect(await state(settled)).to.equal('pending');
      expect(t.channel.calls, 'no ack while an emit is unconfirmed').to.deep.equal([]);
      // The context is closed as soon as the settlement starts.
      await expectClosed(ctx);
      expect(sink.sent).to.have.length(2);
      sink.sent[1].confirm();
      expect((await settled).settled).to.equal('acked');
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats).to.include({ completed: 1, emitted: 2, retried: 0, deadLettered: 0, discarded: 0, givenBack: 0 });
      expect(t.counts).to.deep.equal({ completed: 1, acked: 1 });
      expect(t.publishers.readyCalls, 'nothing republished').to.deep.equal([]);
    });

    it('hands a job whose emit was lost with the publisher channel back unchanged, to due, then acks', async () => {
      const t = setup();
      const job = t.newJob();
      const delivery = t.deliver(job);
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      const settled = t.settlement.settle(delivery, { kind: 'completed', job, ctx, seconds: 0.5 });
      sink.sent[0].refuse(new PublishError('channel closed', 'ojs.direct', 'converted', true));
      expect((await settled).settled).to.equal('acked');
      const publisher = t.publishers.current as FakePublisher;
      expect(publisher.published).to.have.length(1);
      const [copy] = publisher.published;
      expect(copy.exchange).to.equal(names.retry);
      expect(copy.routingKey).to.equal(delayRoutingKey(0, t.queues.due));
      expect(copy.content.equals(delivery.message.content), 'the body is republished byte for byte').to.equal(true);
      expect(copy.body.attempt, 'not counted as an attempt').to.equal(1);
      expect(copy.headers[OJS_HEADERS.attempt]).to.equal(1);
      expect(copy.headers).to.not.have.property('x-death');
      expect(copy.headers[OJS_HEADERS.traceparent]).to.equal(TRACEPARENT);
      expect(copy.options.messageId).to.equal(job.id);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats).to.include({ givenBack: 1, completed: 0, emitted: 0, retried: 0, deadLettered: 0, discarded: 0 });
      expect(t.counts, 'not counted as failed or retried').to.deep.equal({ acked: 1 });
      await expectClosed(ctx);
    });

    it('hands a suspect whose emit was lost back to the suspect queue', async () => {
      const t = setup();
      const job = t.newJob({ attempt: 2 });
      const delivery = t.deliver(job, 'suspect');
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      const settled = t.settlement.settle(delivery, { kind: 'completed', job, ctx, seconds: 0.5 });
      sink.sent[0].refuse(new PublishError('channel closed', 'ojs.direct', 'converted', true));
      expect((await settled).settled).to.equal('acked');
      const [copy] = (t.publishers.current as FakePublisher).published;
      expect(copy.routingKey).to.equal(delayRoutingKey(0, t.queues.suspect));
      expect(copy.body.attempt).to.equal(2);
      expect(t.stats.givenBack).to.equal(1);
    });

    it('fails a job whose emit the broker refused, as if it had thrown: a retry at the next attempt', async () => {
      const t = setup();
      const job = t.newJob();
      const delivery = t.deliver(job);
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      const settled = t.settlement.settle(delivery, { kind: 'completed', job, ctx, seconds: 0.5 });
      sink.sent[0].refuse(new PublishError('message nacked (queue full)', 'ojs.direct', 'converted', false));
      expect((await settled).settled).to.equal('acked');
      const [retry] = (t.publishers.current as FakePublisher).published;
      expect(retry.routingKey).to.equal(delayRoutingKey(2000, t.queues.due));
      expect(retry.body.attempt).to.equal(2);
      expect(retry.body.meta).to.deep.include({ last_error: { type: 'PUBLISH_FAILED', message: 'message nacked (queue full)' } });
      expect(t.stats).to.include({ retried: 1, completed: 0, givenBack: 0 });
      expect(t.counts).to.deep.equal({ failed: 1, retried: 1, acked: 1 });
    });
  });

  describe('failed', () => {
    it('with retries left: one publish to the retry exchange, delayed to due, at attempt + 1; then the ack', async () => {
      const t = setup('incoming', new FakePublisher('p1', 'manual'));
      const job = t.newJob();
      const delivery = t.deliver(job);
      const ctx = t.context(job);
      const settled = t.settlement.settle(delivery, { kind: 'failed', job, error: new Error('converter crashed'), ctx, seconds: 1 });
      await expectClosed(ctx);
      const publisher = t.publishers.current as FakePublisher;
      await nextTurn();
      expect(publisher.published).to.have.length(1);
      expect(await settledOps(t.channel), 'no ack before the retry is confirmed').to.deep.equal([]);
      publisher.confirms[0].confirm();
      expect((await settled).settled).to.equal('acked');
      const [retry] = publisher.published;
      expect(retry.exchange).to.equal(`${config.prefix}.retry`);
      // Attempt 1 failed: initial_interval PT2S, no jitter.
      expect(retry.routingKey).to.equal(delayRoutingKey(2000, t.queues.due));
      expect(retry.body.attempt).to.equal(2);
      expect(retry.body.id).to.equal(job.id);
      expect(retry.body).to.not.have.property('error');
      expect(retry.body.meta).to.deep.include({ last_error: { type: 'Error', message: 'converter crashed' } });
      expect(retry.headers[OJS_HEADERS.attempt]).to.equal(2);
      expect(retry.headers[OJS_HEADERS.traceparent]).to.equal(TRACEPARENT);
      expect(retry.headers).to.not.have.property('x-death');
      expect(retry.options.expiration).to.equal(undefined);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats).to.include({ retried: 1, deadLettered: 0, discarded: 0, givenBack: 0, poisonRedeliveries: 0 });
      expect(t.counts).to.deep.equal({ failed: 1, retried: 1, acked: 1 });
    });

    it('backs off by attempt: attempt 2 waits initial_interval * coefficient', async () => {
      const t = setup();
      const job = t.newJob({ attempt: 2 });
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new Error('again') })).settled).to.equal('acked');
      const [retry] = (t.publishers.current as FakePublisher).published;
      expect(retry.routingKey).to.equal(delayRoutingKey(4000, t.queues.due));
      expect(retry.body.attempt).to.equal(3);
    });

    it('a delivery from the suspect queue retries back to the suspect queue', async () => {
      const t = setup();
      const job = t.newJob({ attempt: 2 });
      const delivery = t.deliver(job, 'suspect');
      expect((await t.settlement.settle(delivery, { kind: 'failed', job, error: new Error('still failing') })).settled).to.equal('acked');
      const [retry] = (t.publishers.current as FakePublisher).published;
      expect(retry.exchange).to.equal(names.retry);
      expect(retry.routingKey).to.equal(delayRoutingKey(4000, t.queues.suspect));
      expect(retry.body.attempt).to.equal(3);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats.retried).to.equal(1);
      expect(t.suspected(), 'a retry is not a new suspect').to.equal(0);
    });

    it('exhausted: dead-lettered to the dead-letter exchange, routed to its own dead queue, then acked', async () => {
      const t = setup();
      const job = t.newJob({ attempt: 3 });
      const delivery = t.deliver(job);
      const ctx = t.context(job);
      expect(
        (await t.settlement.settle(delivery, { kind: 'failed', job, error: new Error('last try'), ctx, seconds: 1 })).settled,
      ).to.equal('acked');
      const [dead] = (t.publishers.current as FakePublisher).published;
      expect(dead.exchange).to.equal(`${config.prefix}.dlx`);
      expect(dead.routingKey).to.equal(t.queues.dead);
      expect(dead.body.error).to.deep.include({ type: 'Error', message: 'last try' });
      expect(dead.body.attempt).to.equal(3);
      expect(dead.body.meta).to.deep.include({ stage: 'converter' });
      expect(dead.headers[OJS_HEADERS.errorType]).to.equal('Error');
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats).to.include({ deadLettered: 1, retried: 0, discarded: 0 });
      expect(t.counts).to.deep.equal({ failed: 1, deadLettered: 1, acked: 1 });
      await expectClosed(ctx);
    });

    it('discarded on exhaustion when the policy says so: acked, nothing published', async () => {
      const t = setup('careless');
      const job = t.newJob();
      const ctx = t.context(job);
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new Error('once'), ctx })).settled).to.equal('acked');
      expect((t.publishers.current as FakePublisher).published).to.deep.equal([]);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats).to.include({ discarded: 1, retried: 0, deadLettered: 0 });
      expect(t.counts).to.deep.equal({ discarded: 1, acked: 1 });
      await expectClosed(ctx);
    });

    it('discarded when the handler asks for it, whatever attempts remain', async () => {
      const t = setup();
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new DiscardJob() })).settled).to.equal('acked');
      expect((t.publishers.current as FakePublisher).published).to.deep.equal([]);
      expect(t.stats.discarded).to.equal(1);
    });

    it('counts a POISON failure as a poison redelivery, and retries it', async () => {
      const t = setup();
      const job = t.newJob();
      const error = new StagecoachError('POISON', 'redelivered too often');
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error })).settled).to.equal('acked');
      expect(t.stats).to.include({ poisonRedeliveries: 1, retried: 1 });
    });

    it('a body that is not a job is dead-lettered byte for byte with the reason in headers', async () => {
      const t = setup();
      const delivery = t.deliver(t.newJob());
      const error = new StagecoachError('INVALID_PAYLOAD', 'the body is not JSON');
      expect((await t.settlement.settle(delivery, { kind: 'failed', job: undefined, error })).settled).to.equal('acked');
      const [dead] = (t.publishers.current as FakePublisher).published;
      expect(dead.exchange).to.equal(names.dlx);
      expect(dead.routingKey).to.equal(t.queues.dead);
      expect(dead.content.equals(delivery.message.content)).to.equal(true);
      expect(dead.headers[OJS_HEADERS.errorType]).to.equal('INVALID_PAYLOAD');
      expect(dead.headers).to.not.have.property('x-death');
      expect(t.stats.deadLettered).to.equal(1);
    });
  });

  describe('suspect', () => {
    it('moves the job to the suspect queue at attempt + 1, acks, and tells the runner', async () => {
      const t = setup('incoming', new FakePublisher('p1', 'manual'));
      const job = t.newJob();
      const delivery = t.deliver(job);
      const settled = t.settlement.settle(delivery, { kind: 'suspect', job });
      const publisher = t.publishers.current as FakePublisher;
      await nextTurn();
      expect(publisher.published).to.have.length(1);
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.suspected(), 'not before the suspect copy is confirmed').to.equal(0);
      publisher.confirms[0].confirm();
      expect((await settled).settled).to.equal('acked');
      const [suspect] = publisher.published;
      expect(suspect.exchange).to.equal(names.retry);
      expect(suspect.routingKey).to.equal(delayRoutingKey(0, t.queues.suspect));
      expect(suspect.body.attempt).to.equal(2);
      expect(suspect.headers[OJS_HEADERS.attempt]).to.equal(2);
      const lastError = (suspect.body.meta as { last_error: { type: string; message: string } }).last_error;
      expect(lastError.type).to.equal('REDELIVERED');
      expect(lastError.message).to.match(/^attempt 1 came back/);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.suspected()).to.equal(1);
      expect(t.stats).to.include({ poisonRedeliveries: 1, retried: 0, deadLettered: 0, givenBack: 0 });
      expect(t.counts).to.deep.equal({ acked: 1 });
    });
  });

  describe('crashed, the suspect queue declared on first use (pooled, following the broker)', () => {
    /** A SuspectDeclaration whose declarations are recorded in `log` beside the publishes, answering by `plan`. */
    function declaring(log: string[], plan: Array<'ok' | 'fail'> = []) {
      const declaration = new SuspectDeclaration({
        topology: { exchanges: [], queues: [], bindings: [] },
        queue: 'suspect',
        log: silent,
        declare: () => {
          log.push('declare');
          return plan.shift() === 'fail' ? Promise.reject(new Error('ACCESS_REFUSED')) : Promise.resolve();
        },
      });
      declaration.attach({} as AmqpConnection);
      return declaration;
    }

    it('declares the suspect queue before the first move there, once per connection', async () => {
      const log: string[] = [];
      const declaration = declaring(log);
      const publisher = new FakePublisher('p1');
      const publish = publisher.publish.bind(publisher);
      publisher.publish = (...args) => {
        log.push(`publish ${args[1]}`);
        return publish(...args);
      };
      const t = setup('incoming', publisher, undefined, [], () => declaration.ensure());
      const suspect = `publish ${delayRoutingKey(0, t.queues.suspect)}`;
      for (const job of [t.newJob(), t.newJob()])
        expect((await t.settlement.settle(t.deliver(job), { kind: 'suspect', job })).settled).to.equal('acked');
      expect(log).to.deep.equal(['declare', suspect, suspect]);
      // Anything else goes where it always did, declaring nothing.
      const failed = t.newJob();
      expect((await t.settlement.settle(t.deliver(failed), { kind: 'failed', job: failed, error: new Error('boom') })).settled).to.equal(
        'acked',
      );
      expect(log.filter((entry) => entry === 'declare')).to.have.length(1);
      // A new connection: declared again (the queue may have been deleted meanwhile).
      declaration.attach({} as AmqpConnection);
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'suspect', job })).settled).to.equal('acked');
      expect(log.slice(-2)).to.deep.equal(['declare', suspect]);
      expect(await settledOps(t.channel)).to.deep.equal([ack(4)]);
    });

    it('a declaration that fails moves nothing and acks nothing: declared again after each wait, rejected only when every wait is spent', async () => {
      const log: string[] = [];
      const declaration = declaring(log, ['fail', 'ok']);
      const t = setup('incoming', new FakePublisher('p1'), undefined, [1, 1], () => declaration.ensure());
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'suspect', job })).settled).to.equal('acked');
      const publisher = t.publishers.current as FakePublisher;
      expect(log).to.deep.equal(['declare', 'declare']);
      expect(publisher.published).to.have.length(1);
      expect(t.suspected()).to.equal(1);

      const failing = declaring([], ['fail', 'fail', 'fail']);
      const spent = setup('incoming', new FakePublisher('p1'), undefined, [1, 1], () => failing.ensure());
      const again = spent.newJob();
      expect((await spent.settlement.settle(spent.deliver(again), { kind: 'suspect', job: again })).settled).to.equal('rejected');
      expect((spent.publishers.current as FakePublisher).published, 'never published to a queue that may not exist').to.deep.equal([]);
      expect(await settledOps(spent.channel)).to.deep.equal([reject(1)]);
      expect(spent.suspected()).to.equal(0);
    });
  });

  describe('publisher faults', () => {
    it('a publish lost with its channel waits for a different publisher, publishes there, and acks once', async () => {
      const first = new FakePublisher('p1', 'lost');
      const t = setup('incoming', first);
      const job = t.newJob();
      const delivery = t.deliver(job);
      const settled = t.settlement.settle(delivery, { kind: 'failed', job, error: new Error('boom') });
      await nextTurn();
      expect(first.published).to.have.length(1);
      expect(t.publishers.readyCalls, 'asked past the publisher that failed').to.deep.equal([undefined, first]);
      expect(t.publishers.waiting).to.equal(1);
      expect(await state(settled)).to.equal('pending');
      expect(t.channel.calls).to.deep.equal([]);
      const healed = new FakePublisher('p2');
      t.publishers.heal(healed);
      expect((await settled).settled).to.equal('acked');
      expect(first.published).to.have.length(1);
      expect(healed.published).to.have.length(1);
      expect(healed.published[0].routingKey).to.equal(first.published[0].routingKey);
      expect(healed.published[0].body.attempt).to.equal(2);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats.retried, 'one retry, not two').to.equal(1);
    });

    it('a publish lost with the current publisher still handed out waits until ready(stale) returns another', async () => {
      // The supervisor still hands out the failed publisher (its close is not reported yet).
      const first = new FakePublisher('p1');
      first.plan = ['lost'];
      const t = setup('incoming', first);
      const job = t.newJob();
      const settled = t.settlement.settle(t.deliver(job), { kind: 'suspect', job });
      await nextTurn();
      expect(await state(settled)).to.equal('pending');
      expect(first.published, 'not published again on the stale publisher').to.have.length(1);
      t.publishers.heal(new FakePublisher('p2'));
      expect((await settled).settled).to.equal('acked');
      expect(first.published).to.have.length(1);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.suspected()).to.equal(1);
    });

    it('a publish the broker refuses rejects the delivery to its dead-letter route: no ack, no requeue', async () => {
      const publisher = new FakePublisher('p1', 'refuse');
      const t = setup('incoming', publisher);
      const job = t.newJob();
      const ctx = t.context(job);
      expect(
        (await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new Error('boom'), ctx, seconds: 1 })).settled,
      ).to.equal('rejected');
      expect(publisher.published).to.have.length(1);
      expect(await settledOps(t.channel)).to.deep.equal([reject(1)]);
      expect(t.stats).to.include({ retried: 0, deadLettered: 0, givenBack: 0 });
      expect(t.counts).to.deep.equal({ failed: 1 });
      await expectClosed(ctx);
    });

    it('a refused suspect copy rejects the delivery, and the runner is not told of a suspect', async () => {
      const t = setup('incoming', new FakePublisher('p1', 'refuse'));
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'suspect', job })).settled).to.equal('rejected');
      expect(await settledOps(t.channel)).to.deep.equal([reject(1)]);
      expect(t.suspected()).to.equal(0);
    });

    it('a suspect copy refused while its queue is unavailable is published again after a wait, then acked', async () => {
      const publisher = new FakePublisher('p1');
      publisher.plan = ['refuse', 'refuse'];
      const t = setup('incoming', publisher, undefined, [1, 1, 1]);
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'suspect', job })).settled).to.equal('acked');
      expect(publisher.published, 'published three times: refused twice, then confirmed').to.have.length(3);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.suspected()).to.equal(1);
    });

    it('a suspect copy refused past every wait rejects the delivery', async () => {
      const t = setup('incoming', new FakePublisher('p1', 'refuse'), undefined, [1, 1]);
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'suspect', job })).settled).to.equal('rejected');
      expect(await settledOps(t.channel)).to.deep.equal([reject(1)]);
    });

    it('a refused hand-back rejects the delivery and is not counted as given back', async () => {
      const t = setup('incoming', new FakePublisher('p1', 'refuse'));
      expect((await t.settlement.handBack(t.deliver(t.newJob()))).settled).to.equal('rejected');
      expect(await settledOps(t.channel)).to.deep.equal([reject(1)]);
      expect(t.stats.givenBack).to.equal(0);
    });

    it('abandons a delivery whose channel closed before the settlement: neither ack nor reject', async () => {
      const t = setup();
      const job = t.newJob();
      const delivery = t.deliver(job);
      const ctx = t.context(job);
      t.source.abandon();
      expect((await t.settlement.settle(delivery, { kind: 'failed', job, error: new Error('boom'), ctx })).settled).to.equal('abandoned');
      expect((t.publishers.current as FakePublisher).published, 'nothing republished').to.deep.equal([]);
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.stats).to.include({ retried: 0, deadLettered: 0, discarded: 0, givenBack: 0 });
      await expectClosed(ctx);
    });

    it('abandons a delivery whose channel closed while it waited for the healed publisher: nothing published there', async () => {
      const first = new FakePublisher('p1', 'lost');
      const t = setup('incoming', first);
      const job = t.newJob();
      const delivery = t.deliver(job);
      const settled = t.settlement.settle(delivery, { kind: 'failed', job, error: new Error('boom') });
      await nextTurn();
      expect(t.publishers.waiting).to.equal(1);
      // The delivery's channel dies while the publisher heals: the broker redelivers the job.
      t.source.abandon();
      const healed = new FakePublisher('p2');
      t.publishers.heal(healed);
      expect((await settled).settled).to.equal('abandoned');
      expect(healed.published, 'a retry published now would run beside the redelivered original').to.deep.equal([]);
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.stats.retried).to.equal(0);
    });

    it('abandons a delivery whose channel closed between a lost publish and the next try', async () => {
      const first = new FakePublisher('p1', 'lost');
      const t = setup('incoming', first);
      const job = t.newJob();
      const delivery = t.deliver(job);
      // Closed (on purpose, as stop() closes it) while the first publish was under way.
      first.publish = (exchange, routingKey) => {
        t.source.closed = true;
        return Promise.reject(new PublishError('channel closed', exchange, routingKey, true));
      };
      expect((await t.settlement.settle(delivery, { kind: 'suspect', job })).settled).to.equal('abandoned');
      expect(t.publishers.readyCalls, 'not asked for another publisher').to.deep.equal([undefined]);
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.suspected()).to.equal(0);
    });

    it('abandons the delivery when ready() rejects (the connection is gone)', async () => {
      const first = new FakePublisher('p1', 'lost');
      const t = setup('incoming', first);
      const job = t.newJob();
      const ctx = t.context(job);
      const settled = t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new Error('boom'), ctx });
      await nextTurn();
      t.publishers.lose();
      expect((await settled).settled).to.equal('abandoned');
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.stats).to.include({ retried: 0, deadLettered: 0, givenBack: 0 });
      await expectClosed(ctx);
    });

    it('abandons at once when there is no publisher to be had', async () => {
      const t = setup();
      t.publishers.lose();
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'suspect', job })).settled).to.equal('abandoned');
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.suspected()).to.equal(0);
    });

    it('abandons a hand-back whose emit was lost when the connection is gone too', async () => {
      const t = setup();
      const job = t.newJob();
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      t.publishers.lose();
      const settled = t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx, seconds: 1 });
      sink.sent[0].refuse(new PublishError('channel closed', 'ojs.direct', 'converted', true));
      expect((await settled).settled).to.equal('abandoned');
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.stats).to.include({ givenBack: 0, completed: 0 });
    });
  });

  describe('dead_letter_queue', () => {
    it('publishes the dead letter to the configured queue, error and all, then acks', async () => {
      const t = setup('guarded');
      const job = t.newJob({ attempt: 2 });
      expect(
        (await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new Error('exhausted'), seconds: 1 })).settled,
      ).to.equal('acked');
      const [dead] = (t.publishers.current as FakePublisher).published;
      expect(dead.exchange).to.equal(names.direct);
      expect(dead.routingKey).to.equal('graveyard');
      expect(dead.body.queue).to.equal('graveyard');
      expect(dead.body.error).to.deep.include({ type: 'Error', message: 'exhausted' });
      expect(dead.body.meta).to.deep.include({ original_queue: 'guarded', stage: 'converter' });
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats.deadLettered).to.equal(1);
      expect(t.counts).to.deep.equal({ failed: 1, deadLettered: 1, acked: 1 });
    });

    it('refused by the configured queue: the dead letter goes to the own dead queue through the dlx, then acks', async () => {
      const publisher = new FakePublisher('p1');
      publisher.plan = ['refuse'];
      const t = setup('guarded', publisher);
      const job = t.newJob();
      const error = new NonRetryableError('corrupt input');
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error })).settled).to.equal('acked');
      expect(publisher.published).to.have.length(2);
      const [refused, fallback] = publisher.published;
      expect(refused.routingKey).to.equal('graveyard');
      expect(fallback.exchange).to.equal(`${config.prefix}.dlx`);
      expect(fallback.routingKey).to.equal(t.queues.dead);
      expect(fallback.body.queue, 'its own queue').to.equal('guarded');
      expect(fallback.body.error).to.deep.include({ type: 'NonRetryableError', message: 'corrupt input' });
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats.deadLettered, 'counted once').to.equal(1);
      expect(t.counts).to.deep.equal({ deadLettered: 1, acked: 1 });
    });

    it('refused by the configured queue and then by the own dead queue: rejected, counted once', async () => {
      const t = setup('guarded', new FakePublisher('p1', 'refuse'));
      const job = t.newJob();
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new NonRetryableError('bad') })).settled).to.equal(
        'rejected',
      );
      expect((t.publishers.current as FakePublisher).published).to.have.length(2);
      expect(await settledOps(t.channel)).to.deep.equal([reject(1)]);
      expect(t.stats.deadLettered).to.equal(1);
    });

    it('lost on the way to the configured queue: tried again there on the healed publisher', async () => {
      const first = new FakePublisher('p1', 'lost');
      const t = setup('guarded', first);
      const job = t.newJob();
      const settled = t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new NonRetryableError('bad') });
      await nextTurn();
      const healed = new FakePublisher('p2');
      t.publishers.heal(healed);
      expect((await settled).settled).to.equal('acked');
      expect(healed.published.map((p) => p.routingKey)).to.deep.equal(['graveyard']);
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats.deadLettered).to.equal(1);
    });
  });

  describe('batch reports (docs/batches.md)', () => {
    const BATCH = 'scan-1';
    /** The records published to the tracking stream (through its exchange), in order. */
    const reportsOf = (publisher: FakePublisher) => publisher.published.filter((p) => p.exchange === names.tracking);
    const othersOf = (publisher: FakePublisher) => publisher.published.filter((p) => p.exchange !== names.tracking);

    it('completed: the report names every emitted id, goes out beside the emits, and the ack waits for both', async () => {
      const t = setup('incoming', new FakePublisher('p1', 'manual'));
      const job = t.newJob({ meta: { batch: BATCH } });
      const delivery = t.deliver(job);
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      void ctx.emit('converted', { type: 'doc.converted' });
      const settled = t.settlement.settle(delivery, { kind: 'completed', job, ctx, seconds: 0.1 });
      await nextTurn();
      const publisher = t.publishers.current as FakePublisher;
      // Published while both emits are still unconfirmed: one confirm wait, not two in a row.
      expect(reportsOf(publisher)).to.have.length(1);
      const [report] = reportsOf(publisher);
      expect(report.routingKey).to.equal('');
      expect(report.options.messageId).to.equal(report.body.id);
      expect(report.body).to.deep.include({
        kind: 'settled',
        job: job.id,
        batch: BATCH,
        outcome: 'completed',
        stage: 'converter',
        attempt: 1,
      });
      expect(report.body.emitted).to.deep.equal(sink.sent.map((s) => s.job.id));
      expect(
        sink.sent.map((s) => s.job.meta.batch),
        'the children join the batch',
      ).to.deep.equal([BATCH, BATCH]);
      sink.sent[0].confirm();
      sink.sent[1].confirm();
      expect(await state(settled)).to.equal('pending');
      expect(t.channel.calls, 'no ack before the report is confirmed').to.deep.equal([]);
      publisher.confirms[0].confirm();
      expect((await settled).settled).to.equal('acked');
      expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      expect(t.stats).to.include({ completed: 1, emitted: 2 });
    });

    it("completed: the reports of one turn's settlements go out in one message, and each ack waits for its confirm", async () => {
      const t = setup('incoming', new FakePublisher('p1', 'manual'));
      const jobs = [t.newJob({ meta: { batch: BATCH } }), t.newJob({ meta: { batch: BATCH } })];
      const settled = jobs.map((job) => t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx: t.context(job), seconds: 0 }));
      await nextTurn();
      await nextTurn();
      const publisher = t.publishers.current as FakePublisher;
      expect(reportsOf(publisher)).to.have.length(1);
      const [message] = reportsOf(publisher);
      expect(message.options.type).to.equal('tracking.settled-group');
      expect(parseRecords(message.content).map((r) => [r.kind, 'job' in r ? r.job : undefined])).to.deep.equal(
        jobs.map((job) => ['settled', job.id]),
      );
      expect(t.channel.calls).to.deep.equal([]);
      publisher.confirms[0].confirm();
      expect((await Promise.all(settled)).map((s) => s.settled)).to.deep.equal(['acked', 'acked']);
      // A later settlement starts a message of its own.
      const late = t.newJob({ meta: { batch: BATCH } });
      const lateSettled = t.settlement.settle(t.deliver(late), { kind: 'completed', job: late, ctx: t.context(late), seconds: 0 });
      await nextTurn();
      await nextTurn();
      expect(reportsOf(publisher)).to.have.length(2);
      expect(reportsOf(publisher)[1].body).to.deep.include({ job: late.id, outcome: 'completed' });
      publisher.confirms[1].confirm();
      expect((await lateSettled).settled).to.equal('acked');
    });

    it('completed: a lost report message hands back every job whose report it held', async () => {
      const t = setup('incoming', new FakePublisher('p1', 'lost'));
      const jobs = [t.newJob({ meta: { batch: BATCH } }), t.newJob({ meta: { batch: BATCH } })];
      const settled = jobs.map((job) => t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx: t.context(job), seconds: 0 }));
      await nextTurn();
      await nextTurn();
      // The hand-backs wait for a healed publisher, and report there (no retraction: nothing was confirmed).
      const healed = new FakePublisher('p2');
      t.publishers.heal(healed);
      expect((await Promise.all(settled)).map((s) => s.settled)).to.deep.equal(['acked', 'acked']);
      expect(reportsOf(healed).map((r) => [r.body.outcome, r.body.retracts])).to.deep.equal([
        ['retrying', undefined],
        ['retrying', undefined],
      ]);
      expect(t.stats).to.include({ givenBack: 2, completed: 0 });
    });

    it("completed: a report lost with the connection, the delivery's channel gone with it: abandoned, not rejected", async () => {
      const t = setup();
      const job = t.newJob({ meta: { batch: BATCH } });
      const settled = t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx: t.context(job), seconds: 0 });
      // The connection goes before the turn's report group is sent: no publisher is to be had,
      // and the broker takes the delivery back (it comes again, redelivered).
      t.publishers.lose();
      t.source.abandon();
      expect((await settled).settled).to.equal('abandoned');
      expect(await settledOps(t.channel)).to.deep.equal([]);
      expect(t.stats).to.include({ completed: 0, givenBack: 0 });
    });

    it('completed: a confirmed report does not ack while an emit is unconfirmed', async () => {
      const t = setup();
      const job = t.newJob({ meta: { batch: BATCH } });
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      const settled = t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx, seconds: 0.1 });
      expect(await state(settled)).to.equal('pending');
      expect(reportsOf(t.publishers.current as FakePublisher)).to.have.length(1);
      expect(t.channel.calls).to.deep.equal([]);
      sink.sent[0].confirm();
      expect((await settled).settled).to.equal('acked');
    });

    for (const [what, outcome, input, make] of [
      ['retry', 'retrying', 'incoming', (job: Job): SettlementInput => ({ kind: 'failed', job, error: new Error('flaky') })],
      ['suspect', 'suspect', 'incoming', (job: Job): SettlementInput => ({ kind: 'suspect', job })],
      ['dead letter', 'dead', 'incoming', (job: Job): SettlementInput => ({ kind: 'failed', job, error: new NonRetryableError('broken') })],
      [
        'dead letter to dead_letter_queue',
        'dead',
        'guarded',
        (job: Job): SettlementInput => ({ kind: 'failed', job, error: new NonRetryableError('x') }),
      ],
    ] as const) {
      it(`${what}: the "${outcome}" report and the replacement in one confirm wait; the ack only after both`, async () => {
        const t = setup(input, new FakePublisher('p1', 'manual'));
        const job = t.newJob({ meta: { batch: BATCH } });
        const settled = t.settlement.settle(t.deliver(job), make(job));
        await nextTurn();
        const publisher = t.publishers.current as FakePublisher;
        expect(publisher.published, 'both out before either is confirmed').to.have.length(2);
        expect(othersOf(publisher)).to.have.length(1);
        const [report] = reportsOf(publisher);
        expect(report.body).to.deep.include({ kind: 'settled', job: job.id, batch: BATCH, outcome });
        if (outcome !== 'dead') expect(report.body.next_attempt).to.equal(2);
        expect(report.body.error).to.have.property('type');
        // Confirm the replacement alone: still no ack.
        publisher.confirms[publisher.published.indexOf(othersOf(publisher)[0])].confirm();
        expect(await state(settled)).to.equal('pending');
        expect(t.channel.calls).to.deep.equal([]);
        publisher.confirms[publisher.published.indexOf(report)].confirm();
        expect((await settled).settled).to.equal('acked');
        expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
      });
    }

    it('discard: nothing replaces the job, but the ack waits for the "discarded" report', async () => {
      const t = setup('careless', new FakePublisher('p1', 'manual'));
      const job = t.newJob({ meta: { batch: BATCH } });
      const settled = t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new Error('once is enough') });
      await nextTurn();
      const publisher = t.publishers.current as FakePublisher;
      expect(othersOf(publisher)).to.deep.equal([]);
      expect(reportsOf(publisher).map((r) => r.body.outcome)).to.deep.equal(['discarded']);
      expect(t.channel.calls).to.deep.equal([]);
      publisher.confirms[0].confirm();
      expect((await settled).settled).to.equal('acked');
      expect(t.stats.discarded).to.equal(1);
    });

    it('a job without a batch publishes no report, whatever its outcome', async () => {
      const outcomes: Array<[string, (job: Job, ctx: JobContext) => SettlementInput]> = [
        ['incoming', (job, ctx) => ({ kind: 'completed', job, ctx, seconds: 0 })],
        ['incoming', (job, ctx) => ({ kind: 'failed', job, error: new Error('retry me'), ctx })],
        ['incoming', (job, ctx) => ({ kind: 'failed', job, error: new NonRetryableError('dead'), ctx })],
        ['careless', (job, ctx) => ({ kind: 'failed', job, error: new Error('discard me'), ctx })],
        ['incoming', (job) => ({ kind: 'suspect', job })],
      ];
      for (const [input, outcome] of outcomes) {
        const t = setup(input);
        const job = t.newJob();
        expect((await t.settlement.settle(t.deliver(job), outcome(job, t.context(job)))).settled).to.equal('acked');
        expect(reportsOf(t.publishers.current as FakePublisher)).to.deep.equal([]);
      }
    });

    it('a job of a tracked queue reports its start, its result and its failures though it has no batch (docs/job-state.md)', async () => {
      const t = setup('tracked');
      const done = t.newJob();
      const ctx = trackedContext(done, { pages: 3 });
      t.settlement.started(done);
      expect((await t.settlement.settle(t.deliver(done), { kind: 'completed', job: done, ctx, seconds: 0 })).settled).to.equal('acked');
      const failing = t.newJob();
      await t.settlement.settle(t.deliver(failing), { kind: 'failed', job: failing, error: new Error('no luck'), ctx: t.context(failing) });
      const records = reportsOf(t.publishers.current as FakePublisher).flatMap((p) => parseRecords(p.content));
      expect(records.map((r) => (r.kind === 'settled' ? [r.job, r.outcome, r.batch] : r.kind))).to.deep.equal([
        [done.id, 'started', undefined],
        [done.id, 'completed', undefined],
        [failing.id, 'retrying', undefined],
      ]);
      expect(records[1]).to.deep.include({ result: { pages: 3 }, emitted: [] });
      expect(records[2]).to.deep.include({ next_attempt: 2, error: { type: 'Error', message: 'no luck' } });
    });

    it('a result JSON cannot write is left out of its report, and the jobs reported in the same message still complete', async () => {
      const t = setup('tracked');
      const tracked = (result: unknown): { job: Job; ctx: JobContext } => {
        const job = t.newJob();
        return { job, ctx: trackedContext(job, result) };
      };
      const bad = tracked({ pages: 10n });
      const good = tracked({ pages: 3 });
      // Settled in one turn: their completed reports share one stream message.
      const settled = [bad, good].map(({ job, ctx }) => t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx, seconds: 0 }));
      expect((await Promise.all(settled)).map((s) => s.settled)).to.deep.equal(['acked', 'acked']);
      const records = reportsOf(t.publishers.current as FakePublisher).flatMap((p) => parseRecords(p.content));
      expect(records.map((r) => (r.kind === 'settled' ? [r.job, r.outcome, r.result] : r.kind))).to.deep.equal([
        [bad.job.id, 'completed', undefined],
        [good.job.id, 'completed', { pages: 3 }],
      ]);
    });

    it('an emit refused after the completed report went: the retry report retracts it and lists the unsent child', async () => {
      const t = setup();
      const job = t.newJob({ meta: { batch: BATCH } });
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      void ctx.emit('converted', { type: 'doc.converted' }).catch(() => undefined);
      const settled = t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx, seconds: 0.1 });
      sink.sent[0].confirm();
      sink.sent[1].refuse(new PublishError('message nacked (queue full)', 'ojs.direct', 'converted', false));
      expect((await settled).settled).to.equal('acked');
      const publisher = t.publishers.current as FakePublisher;
      const [completed, retrying] = reportsOf(publisher);
      expect(completed.body.outcome).to.equal('completed');
      expect(retrying.body).to.deep.include({ outcome: 'retrying', retracts: completed.body.id, next_attempt: 2 });
      expect(retrying.body.unsent).to.deep.equal([sink.sent[1].job.id]);
      expect(othersOf(publisher).map((p) => p.exchange)).to.deep.equal([names.retry]);
      expect(t.stats).to.include({ retried: 1, completed: 0 });
    });

    it('an emit lost with the publisher channel after the completed report went: the hand-back report retracts it', async () => {
      const t = setup();
      const job = t.newJob({ meta: { batch: BATCH } });
      const sink = new ControlledSink();
      const ctx = t.context(job, sink);
      void ctx.emit('converted', { type: 'doc.converted' });
      const settled = t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx, seconds: 0.1 });
      sink.sent[0].refuse(new PublishError('channel closed', 'ojs.direct', 'converted', true));
      expect((await settled).settled).to.equal('acked');
      const [completed, handBack] = reportsOf(t.publishers.current as FakePublisher);
      // Not an attempt: it runs again at the same one.
      expect(handBack.body).to.deep.include({ outcome: 'retrying', retracts: completed.body.id, next_attempt: 1 });
      expect(t.stats.givenBack).to.equal(1);
    });

    it('a replacement refused after its report was confirmed: a "dead" report retracts it, then the reject', async () => {
      const publisher = new FakePublisher('p1');
      publisher.plan = ['refuse', 'ok', 'ok'];
      const t = setup('incoming', publisher);
      const job = t.newJob({ meta: { batch: BATCH } });
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error: new Error('flaky') })).settled).to.equal('rejected');
      const [retrying, dead] = reportsOf(publisher);
      expect(retrying.body.outcome).to.equal('retrying');
      expect(dead.body).to.deep.include({ outcome: 'dead', retracts: retrying.body.id, id: `${retrying.body.id as string}.refused` });
      expect(await settledOps(t.channel)).to.deep.equal([reject(1)]);
    });

    it("a job refused for its publisher (TENANT_MISMATCH) is reported dead with the queue's tenant, never its claim", async () => {
      const t = setup('incoming', new FakePublisher('p1', 'manual'), 'acme');
      const claim = t.newJob({ tenant: 'globex', meta: { batch: BATCH } });
      const delivery = t.deliver(claim);
      const error = new TenantMismatchError('acme', 'ojs.producer.globex', 'a job for tenant "acme" published by globex');
      const settled = t.settlement.settle(delivery, { kind: 'failed', job: undefined, error, refused: claim });
      await nextTurn();
      const publisher = t.publishers.current as FakePublisher;
      const [dead] = othersOf(publisher);
      // Dead-lettered here, byte for byte, as before: the report changes nothing of that.
      expect(dead.exchange).to.equal(names.dlx);
      expect(dead.routingKey).to.equal(t.queues.dead);
      expect(dead.content.equals(delivery.message.content)).to.equal(true);
      const [report] = reportsOf(publisher);
      expect(report.body).to.deep.include({ job: claim.id, batch: BATCH, tenant: 'acme', outcome: 'dead' });
      expect(report.body.error).to.deep.include({ type: 'TENANT_MISMATCH' });
      expect(t.channel.calls).to.deep.equal([]);
      for (const c of publisher.confirms) c.confirm();
      expect((await settled).settled).to.equal('acked');
      expect(t.stats.deadLettered).to.equal(1);
    });

    it('a job refused for its publisher on a shared queue is reported without a tenant (its claim is not one)', async () => {
      const t = setup();
      const claim = t.newJob({ tenant: 'globex', meta: { batch: BATCH } });
      const error = new TenantMismatchError('globex', 'ojs.producer.acme', 'not acme');
      expect((await t.settlement.settle(t.deliver(claim), { kind: 'failed', job: undefined, error, refused: claim })).settled).to.equal(
        'acked',
      );
      const [report] = reportsOf(t.publishers.current as FakePublisher);
      expect(report.body).to.not.have.property('tenant');
      expect(report.body).to.deep.include({ job: claim.id, outcome: 'dead' });
    });

    it('a job failed by a TENANT_MISMATCH of its own (an emit refused) is reported like any failure', async () => {
      const t = setup();
      const job = t.newJob({ meta: { batch: BATCH } });
      const error = new TenantMismatchError('globex', 'ojs.stage.acme', 'may not emit for globex');
      expect((await t.settlement.settle(t.deliver(job), { kind: 'failed', job, error })).settled).to.equal('acked');
      const [report] = reportsOf(t.publishers.current as FakePublisher);
      expect(report.body).to.deep.include({ job: job.id, outcome: 'dead' });
    });

    it('the catch-all (settling itself failed) reports the batched job dead before rejecting it', async () => {
      const t = setup();
      const job = t.newJob({ meta: { batch: BATCH } });
      // A context whose settle() throws: a bug in the settlement's own path.
      const broken = {
        children: [],
        unsent: [],
        settle: () => {
          throw new Error('bug');
        },
      } as unknown as JobContext;
      expect((await t.settlement.settle(t.deliver(job), { kind: 'completed', job, ctx: broken, seconds: 0 })).settled).to.equal('rejected');
      const [report] = reportsOf(t.publishers.current as FakePublisher);
      expect(report.body).to.deep.include({ job: job.id, batch: BATCH, outcome: 'dead' });
      expect(report.body.error).to.deep.include({ type: 'SETTLEMENT_FAILED' });
      expect(await settledOps(t.channel)).to.deep.equal([reject(1)]);
    });

    it('the catch-all still rejects when its report is refused, and without one when no publisher is at hand', async () => {
      const broken = {
        children: [],
        unsent: [],
        settle: () => {
          throw new Error('bug');
        },
      } as unknown as JobContext;
      const refusing = setup('incoming', new FakePublisher('p1', 'refuse'));
      const job = refusing.newJob({ meta: { batch: BATCH } });
      expect(
        (await refusing.settlement.settle(refusing.deliver(job), { kind: 'completed', job, ctx: broken, seconds: 0 })).settled,
      ).to.equal('rejected');
      expect(reportsOf(refusing.publishers.current as FakePublisher)).to.have.length(1);
      expect(await settledOps(refusing.channel)).to.deep.equal([reject(1)]);
      // No publisher now: the reject does not wait for one to heal.
      const none = setup();
      none.publishers.current = undefined;
      expect((await none.settlement.settle(none.deliver(job), { kind: 'completed', job, ctx: broken, seconds: 0 })).settled).to.equal(
        'rejected',
      );
      expect(none.publishers.readyCalls).to.deep.equal([]);
      expect(await settledOps(none.channel)).to.deep.equal([reject(1)]);
    });
  });

  it('gives back an unstarted delivery unchanged through the ladder to due, and acks it', async () => {
    const t = setup();
    const job = t.newJob({ attempt: 2 });
    const delivery = t.deliver(job, 'due');
    expect((await t.settlement.handBack(delivery)).settled).to.equal('acked');
    const [copy] = (t.publishers.current as FakePublisher).published;
    expect(copy.exchange).to.equal(names.retry);
    expect(copy.routingKey).to.equal(delayRoutingKey(0, t.queues.due));
    expect(copy.content.equals(delivery.message.content)).to.equal(true);
    expect(copy.headers[OJS_HEADERS.attempt]).to.equal(2);
    expect(copy.headers).to.not.have.property('x-death');
    expect(await settledOps(t.channel)).to.deep.equal([ack(1)]);
    expect(t.stats.givenBack).to.equal(1);
  });

  it('every outcome leaves the context closed', async () => {
    const outcomes: Array<(job: Job, ctx: JobContext) => SettlementInput> = [
      (job, ctx) => ({ kind: 'completed', job, ctx, seconds: 0 }),
      (job, ctx) => ({ kind: 'failed', job, error: new Error('retry me'), ctx }),
      (job, ctx) => ({ kind: 'failed', job, error: new NonRetryableError('dead'), ctx }),
      (job, ctx) => ({ kind: 'failed', job, error: new DiscardJob(), ctx }),
    ];
    const results: Settled[] = [];
    for (const outcome of outcomes) {
      const t = setup();
      const job = t.newJob();
      const ctx = t.context(job);
      results.push((await t.settlement.settle(t.deliver(job), outcome(job, ctx))).settled);
      await expectClosed(ctx);
    }
    expect(results).to.deep.equal(['acked', 'acked', 'acked', 'acked']);
  });
});
