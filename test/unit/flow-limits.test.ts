import { expect } from 'chai';
import type { Channel, ConsumeMessage, Message } from 'amqplib';
import { compileConfig } from '../../src/config/compile-config.js';
import { bucketsOf, bucketQueues, type Bucket } from '../../src/flow/bucket.js';
import { LimitResolver, type LimitScope } from '../../src/flow/limit-resolver.js';
import { Permit } from '../../src/flow/permit.js';
import { FlowWatch } from '../../src/flow/flow-watch.js';
import type { Token, TokenSource } from '../../src/flow/token-source.js';
import { Dispatcher } from '../../src/runner/intake/dispatcher.js';
import type { Delivery } from '../../src/runner/channels/delivery.js';
import type { ConsumerSource } from '../../src/runner/channels/consumer-source.js';
import { ConfigError, InvalidPayloadError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import { toWire } from '../../src/job/amqp-mapping.js';

/** A token source whose tokens the test hands out: `grant(id)` serves the first waiter of a bucket. */
function fakeSource(): {
  source: TokenSource;
  grant(id: string): void;
  waiting(id: string): number;
  spent: string[];
  given: string[];
  released: string[];
} {
  const waiters = new Map<string, Array<(token: Token) => void>>();
  const spent: string[] = [];
  const given: string[] = [];
  const released: string[] = [];
  const buckets = new Map<string, Bucket>();
  const source = {
    take(bucket: Bucket, grant: (token: Token) => void) {
      buckets.set(bucket.id, bucket);
      const line = waiters.get(bucket.id) ?? [];
      waiters.set(bucket.id, line);
      line.push(grant);
      return { cancel: () => line.splice(line.indexOf(grant), 1) };
    },
    spend: (token: Token) => spent.push(token.bucket.id),
    giveBack: (token: Token) => given.push(token.bucket.id),
    release: (token: Token) => released.push(token.bucket.id),
  } as unknown as TokenSource;
  return {
    source,
    spent,
    given,
    released,
    waiting: (id) => waiters.get(id)?.length ?? 0,
    grant(id) {
      const next = waiters.get(id)?.shift();
      if (next === undefined) throw new Error(`nobody waits for ${id}`);
      next({ bucket: buckets.get(id) as Bucket, message: {} as ConsumeMessage, channel: {} as Channel, since: 0 });
    },
  };
}

describe('flow limits: buckets', () => {
  it('makes one bucket per strategy, concurrency first, the cooldown (window plus a margin) in the id of a window', () => {
    const buckets = bucketsOf('ocr', { concurrency: 5, rate: { limit: 50, periodMs: 1000 }, throttle: { limit: 10, periodMs: 1000 } });
    expect(buckets.map((b) => [b.id, b.size, b.cooldownMs])).to.deep.equal([
      ['ocr.concurrency', 5, undefined],
      ['ocr.rate.1010', 50, 1010],
      ['ocr.throttle.105', 1, 105],
    ]);
    expect(bucketQueues('p', buckets[1])).to.deep.equal({
      tokens: 'p.flow.ocr.rate.1010',
      ledger: 'p.flow.ocr.rate.1010.ledger',
      cooldown: 'p.flow.ocr.rate.1010.cooldown',
      lock: 'p.flow.ocr.rate.1010.lock',
    });
  });
});

describe('flow limits: which apply to a delivery', () => {
  const config = compileConfig({
    tenants: [{ name: 'acme', queues: { work: { concurrency: 2 } } }, 'globex'],
    queues: { work: { concurrency: 4, rate_limit: { limit: 100, period: 'PT1M' } }, calls: { scope: 'shared' } },
    limits: { ocr: { rate: { limit: 5, period: 'PT1S' }, per_tenant: true }, gpu: { concurrency: 1 } },
    stages: { conv: { module: 'x.js', limits: ['ocr', 'gpu'] }, caller: { module: 'y.js', limits: ['ocr'] } },
  });
  const settings = { config, version: 1 };
  const scope = (over: Partial<LimitScope>): LimitScope => ({
    stage: 'conv',
    queue: 'work',
    physical: 'p.work.acme',
    tenant: 'acme',
    ...over,
  });
  const ids = (buckets: Bucket[]): string[] => buckets.map((b) => `${b.id}/${b.size}`);

  it("takes the tenant's own queue settings first, then the stage's limits, partitioned per tenant where asked", () => {
    const acme = new LimitResolver(settings, scope({}), 'x-ojs-tenant');
    expect(ids(acme.buckets({}))).to.deep.equal([
      'gpu.concurrency/1',
      'queue:p.work.acme.concurrency/2',
      'ocr@acme.rate.1010/5',
      'queue:p.work.acme.rate.60050/100',
    ]);
    const globex = new LimitResolver(settings, scope({ tenant: 'globex', physical: 'p.work.globex' }), 'x-ojs-tenant');
    expect(ids(globex.buckets({}))).to.include('queue:p.work.globex.concurrency/4');
  });

  it("on a shared queue, partitions a per-tenant limit by each job's tenant header", () => {
    const shared = new LimitResolver(
      settings,
      scope({ stage: 'caller', queue: 'calls', physical: 'p.calls', tenant: undefined }),
      'x-ojs-tenant',
    );
    expect(ids(shared.buckets({ 'x-ojs-tenant': 'globex' }))).to.deep.equal(['ocr@globex.rate.1010/5']);
    expect(ids(shared.buckets({ 'x-ojs-tenant': 'acme' }))).to.deep.equal(['ocr@acme.rate.1010/5']);
  });

  it("adds a job's own policy; a configured limit of the same key wins over the job's numbers", () => {
    const resolver = new LimitResolver(
      settings,
      scope({ stage: 'caller', queue: 'calls', physical: 'p.calls', tenant: undefined }),
      'x-ojs-tenant',
    );
    const own = JSON.stringify({ key: 'stripe', concurrency: 3, throttle: { limit: 2, period: 'PT1S' } });
    expect(ids(resolver.buckets({ 'x-ojs-tenant': 'acme', 'x-ojs-rate-limit': own }))).to.deep.equal([
      'stripe.concurrency/3',
      'ocr@acme.rate.1010/5',
      'stripe.throttle.505/1',
    ]);
    const claimsGpu = JSON.stringify({ key: 'gpu', concurrency: 50 });
    expect(ids(resolver.buckets({ 'x-ojs-tenant': 'acme', 'x-ojs-rate-limit': claimsGpu }))).to.include('gpu.concurrency/1');
  });

  it('needs nothing for a queue and stage without limits', () => {
    const plain = compileConfig({ stages: { conv: { module: 'x.js' } } });
    expect(new LimitResolver({ config: plain, version: 1 }, scope({}), 'x-ojs-tenant').buckets({})).to.deep.equal([]);
  });

  it('refuses a stage naming a limit nobody configured, and a window out of range, naming the key', () => {
    expect(() => compileConfig({ stages: { conv: { module: 'x.js', limits: ['nope'] } } })).to.throw(ConfigError, 'stages.conv.limits.0');
    expect(() => compileConfig({ limits: { a: { rate: { limit: 5, period: 'PT0.001S' } } } })).to.throw(
      ConfigError,
      'limits.a.rate.period',
    );
    expect(() => compileConfig({ limits: { a: { per_tenant: true } } })).to.throw(
      ConfigError,
      'at least one of concurrency, rate and throttle',
    );
    expect(() => compileConfig({ queues: { q: { rate_limit: { limit: 1, period: 'P2D' } } } })).to.throw(
      ConfigError,
      'queues.q.rate_limit.period',
    );
  });
});

describe("flow limits: a job's own policy", () => {
  it('travels in the envelope and in header x-ojs-rate-limit', () => {
    const job = createJob({ type: 't', rate_limit: { key: 'stripe', concurrency: 2 } }, { queue: 'q', tenant: 'acme' });
    const wire = toWire(job, { tenantHeader: 'x-ojs-tenant' });
    expect(JSON.parse(wire.options.headers?.['x-ojs-rate-limit'] as string)).to.deep.equal({ key: 'stripe', concurrency: 2 });
  });

  it('is refused with its reason when it cannot be enforced', () => {
    const bad =
      (rate_limit: unknown): (() => unknown) =>
      () =>
        createJob({ type: 't', rate_limit: rate_limit as never }, { queue: 'q' });
    expect(bad({ concurrency: 2 })).to.throw(InvalidPayloadError, '"key"');
    expect(bad({ key: 'a b' })).to.throw(InvalidPayloadError, '"key"');
    expect(bad({ key: 'k', rate: { limit: 0, period: 'PT1S' } })).to.throw(InvalidPayloadError, '"rate.limit"');
    expect(bad({ key: 'k', on_limit: 'later' })).to.throw(InvalidPayloadError, '"on_limit"');
  });
});

describe('flow limits: Permit', () => {
  const concurrency: Bucket = { id: 'a.concurrency', partition: 'a', strategy: 'concurrency', size: 1 };
  const rate: Bucket = { id: 'a.rate.1010', partition: 'a', strategy: 'rate', size: 5, cooldownMs: 1010 };

  it('takes its buckets one after another, and is granted once it holds them all', () => {
    const fake = fakeSource();
    let granted = 0;
    const permit = new Permit(fake.source, [concurrency, rate], () => granted++);
    expect(fake.waiting('a.concurrency')).to.equal(1);
    expect(fake.waiting('a.rate.1010')).to.equal(0);
    fake.grant('a.concurrency');
    expect(fake.waiting('a.rate.1010')).to.equal(1);
    expect(permit.granted).to.equal(false);
    fake.grant('a.rate.1010');
    expect([permit.granted, granted]).to.deep.equal([true, 1]);
  });

  it('spends rate tokens when the job starts and releases concurrency tokens when it ends', () => {
    const fake = fakeSource();
    const permit = new Permit(fake.source, [concurrency, rate], () => undefined);
    fake.grant('a.concurrency');
    fake.grant('a.rate.1010');
    permit.start();
    expect(fake.spent).to.deep.equal(['a.rate.1010']);
    permit.end();
    expect([fake.released, fake.given]).to.deep.equal([['a.concurrency'], []]);
  });

  it('gives back what it holds, unspent, when the job never starts, and stops waiting', () => {
    const fake = fakeSource();
    const permit = new Permit(fake.source, [concurrency, rate], () => undefined);
    fake.grant('a.concurrency');
    permit.end();
    expect([fake.given, fake.spent, fake.waiting('a.rate.1010')]).to.deep.equal([['a.concurrency'], [], 0]);
  });
});

describe('Dispatcher with flow limits', () => {
  const delivery = (tag: number, limited: boolean): Delivery => ({
    message: { fields: { deliveryTag: tag }, properties: { headers: { limited } }, content: Buffer.alloc(0) } as unknown as Message,
    source: {} as ConsumerSource,
    input: 'main',
    queue: 'q',
  });
  const bucket: Bucket = { id: 'k.concurrency', partition: 'k', strategy: 'concurrency', size: 1 };

  it('passes over a delivery whose permit waits, starts the next that may start, and starts the first once granted (RL-004)', async () => {
    const fake = fakeSource();
    const started: number[] = [];
    const dispatcher = new Dispatcher({
      concurrency: 2,
      process: async (d) => {
        started.push(d.message.fields.deliveryTag);
        await new Promise(() => undefined);
      },
      handBack: async () => undefined,
      admit: (d, granted) => (d.message.properties.headers?.limited === true ? new Permit(fake.source, [bucket], granted) : undefined),
    });
    dispatcher.openUp();
    dispatcher.offer(delivery(1, true));
    dispatcher.offer(delivery(2, false));
    expect(started).to.deep.equal([2]);
    fake.grant('k.concurrency');
    expect(started).to.deep.equal([2, 1]);
  });

  it('runs a suspect alone only once its permit is granted: the tokens of its limits hold for it too', async () => {
    const fake = fakeSource();
    const started: number[] = [];
    const dispatcher = new Dispatcher({
      concurrency: 1,
      process: async (d) => void started.push(d.message.fields.deliveryTag),
      handBack: async () => undefined,
      admit: (_d, granted) => new Permit(fake.source, [bucket], granted),
    });
    const alone = dispatcher.runAlone(delivery(7, true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(started, 'started before its token').to.deep.equal([]);
    fake.grant('k.concurrency');
    await alone;
    expect(started).to.deep.equal([7]);
    expect(fake.given, 'its token goes back when it ends').to.deep.equal(['k.concurrency']);
  });

  it('hands back what waits with its permit when it closes, the tokens it holds given back', async () => {
    const fake = fakeSource();
    const handed: number[] = [];
    const limited: Bucket[] = [bucket, { ...bucket, id: 'j.concurrency', partition: 'j' }];
    const dispatcher = new Dispatcher({
      concurrency: 1,
      process: async () => undefined,
      handBack: async (d) => handed.push(d.message.fields.deliveryTag),
      admit: (_d, granted) => new Permit(fake.source, limited, granted),
    });
    dispatcher.openUp();
    dispatcher.offer(delivery(1, true));
    fake.grant('k.concurrency');
    await dispatcher.close();
    expect(handed).to.deep.equal([1]);
    expect(fake.given).to.deep.equal(['k.concurrency']);
    expect(fake.waiting('j.concurrency')).to.equal(0);
  });
});

describe('flow limits: FlowWatch', () => {
  const bucket: Bucket = { id: 'ocr@acme.rate.1010', partition: 'ocr@acme', strategy: 'rate', size: 5, cooldownMs: 1010 };

  it('counts every wait, turns a limit met into one exceeded event and its end into one released event', () => {
    const events: Array<[string, Record<string, unknown>]> = [];
    const counted = { waited: 0, exceeded: 0 };
    let now = 0;
    const watch = new FlowWatch(
      { waited: () => counted.waited++, exceeded: () => counted.exceeded++ },
      (type, _key, data) => events.push([type, data]),
      () => now,
    );
    watch.granted(bucket, 2, 0); // a free token: its round trip only
    watch.granted(bucket, 0.1, 0); // handed over within the process: not observed
    watch.granted(bucket, 400, 3);
    now += 1000;
    watch.granted(bucket, 500, 2);
    watch.granted(bucket, 600, 0);
    expect(counted).to.deep.equal({ waited: 4, exceeded: 3 });
    expect(events).to.deep.equal([
      ['rate_limit.exceeded', { key: 'ocr@acme', strategy: 'rate', limit: 5, current: 3 }],
      ['rate_limit.released', { key: 'ocr@acme', strategy: 'rate' }],
    ]);
  });
});
