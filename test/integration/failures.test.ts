import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { GetMessage } from 'amqplib';
import { retryDeadLetters, listDeadLetters } from '../../src/dead-letters/dead-letter-actions.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { DELAY_LEVELS, delayRoutingKey } from '../../src/topology/delay-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { abortReasons, healed, lateEmits, seen } from '../fixtures/failure-stages.js';
import { closeConnections } from '../helpers/broker-admin.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'failures' }, 'error');
const body = (m: GetMessage): Job => JSON.parse(m.content.toString()) as Job;

export const FAILURE_CONFIG: RawConfig = {
  tenants: ['acme', 'globex'],
  queues: {
    work: {
      default_retry: {
        max_attempts: 3,
        initial_interval: 'PT1S',
        backoff_coefficient: 2,
        jitter: false,
        non_retryable_errors: ['Validation.*'],
      },
    },
    fragile: { default_retry: { max_attempts: 1 }, dead_letter_queue: 'quarantine' },
    quarantine: {},
  },
  stages: {
    flaky: { module: './failure-stages.js', concurrency: 8 },
    fragile: { module: './failure-stages.js' },
  },
};

describe('failures without loss', function () {
  let config: CompiledConfig;
  let running: RunningGroup;
  let names: BrokerNames;
  let group: StageGroup;
  let raw: RawBroker;
  let publisher: Publisher;
  let key = 0;
  const nextKey = (): string => `job-${++key}`;
  const work = (): string => names.queue('work', 'acme');
  const dead = (): string => names.deadQueue('work', 'acme');
  const done = (): string => names.queue('done', 'acme');

  before(async () => {
    config = withTestConfig(FAILURE_CONFIG, path.join(here, '../fixtures/config.json'));
    running = await startGroup(
      config,
      [
        { stage: 'flaky', tenant: 'acme' },
        { stage: 'fragile', tenant: 'acme' },
      ],
      log,
    );
    ({ names, group, raw, publisher } = running);
  });

  after(() => running.stop());

  afterEach(async () => {
    for (const queue of [work(), dead(), done(), names.queue('quarantine', 'acme')]) await raw.drain(queue);
  });

  const flaky = (mode: string, k: string, n?: unknown, extra: Partial<Job> = {}): Promise<string> =>
    publisher.publish('work', { type: 'flaky', args: n === undefined ? [mode, k] : [mode, k, n], tenant: 'acme', ...extra });

  it('completes a job that fails twice on attempt 3, after waits of 1 s and 2 s on the broker', async () => {
    const k = nextKey();
    await flaky('fail-times', k, 2);
    await waitFor('the job done', async () => (await raw.count(done())) === 1);
    const attempts = seen.get(k) ?? [];
    expect(attempts.map((a) => a.attempt)).to.deep.equal([1, 2, 3]);
    expect(attempts.map((a) => a.header)).to.deep.equal([1, 2, 3]);
    const waits = [attempts[1].at - attempts[0].at, attempts[2].at - attempts[1].at];
    expect(Math.abs(waits[0] - 1000), `first wait ${waits[0]} ms`).to.be.below(1000);
    expect(Math.abs(waits[1] - 2000), `second wait ${waits[1]} ms`).to.be.below(1000);
    expect(waits[1]).to.be.greaterThan(waits[0]);
    const [result] = await raw.drain(done());
    expect(body(result).args).to.deep.equal([k, 3]);
    expect(await raw.count(dead())).to.equal(0);
  });

  it('dead-letters a job that always fails after exactly max_attempts, and dead retry sends it back once', async () => {
    const k = nextKey();
    const id = await flaky('always', k);
    await waitFor('the dead letter', async () => (await raw.count(dead())) === 1);
    expect((seen.get(k) ?? []).map((a) => a.attempt)).to.deep.equal([1, 2, 3]);

    const [entry] = await listDeadLetters(config, 'work', 'acme', log);
    expect(entry).to.include({ id, attempt: 3, errorType: 'TypeError', errorMessage: `always failing (${k})`, isJob: true });
    expect(await raw.count(dead()), 'list leaves it in place').to.equal(1);

    healed.add(k);
    expect(await retryDeadLetters(config, 'work', 'acme', log)).to.deep.equal({ retried: 1, kept: 0 });
    await waitFor('the revived job done', async () => (await raw.count(done())) === 1);
    const attempts = seen.get(k) ?? [];
    expect(attempts.at(-1)?.attempt, 'fresh attempt count').to.equal(1);
    expect(attempts).to.have.length(4);
    const [result] = await raw.drain(done());
    expect(body(result).meta.parent_id).to.equal(id);
    expect(await raw.counts([dead(), work(), done()])).to.deep.equal({ [dead()]: 0, [work()]: 0, [done()]: 0 });
  });

  it('keeps the error history in meta across dead retry', async () => {
    const k = nextKey();
    await flaky('fatal', k);
    await waitFor('dead once', async () => (await raw.count(dead())) === 1);
    await retryDeadLetters(config, 'work', 'acme', log);
    await waitFor('dead twice', async () => (await raw.count(dead())) === 1 && (seen.get(k)?.length ?? 0) === 2);
    const [again] = await raw.drain(dead());
    const job = body(again);
    expect(job.attempt).to.equal(1);
    expect(job.error).to.include({ type: 'NonRetryableError', message: 'fatal' });
    expect((job.meta.errors as Array<{ type: string; attempt: number }>).map((e) => [e.type, e.attempt])).to.deep.equal([
      ['NonRetryableError', 1],
    ]);
  });

  it('aborts a handler past its timeout through ctx.signal and fails it with HANDLER_TIMEOUT', async () => {
    const k = nextKey();
    await flaky('sleep', k, undefined, { timeout: 1, retry: { max_attempts: 1 } });
    await waitFor('the timed-out job dead', async () => (await raw.count(dead())) === 1);
    const [deadLetter] = await raw.drain(dead());
    expect(deadLetter.properties.headers).to.include({ 'x-ojs-error-type': 'HANDLER_TIMEOUT' });
    expect(seen.get(k)?.[0].aborted).to.equal(true);
    expect(await raw.count(done()), 'emits after the timeout are refused').to.equal(0);
  });

  it('follows handler outcomes: RETRY after its delay, DISCARD, DEAD_LETTER', async () => {
    const [retried, discarded, deadLettered] = [nextKey(), nextKey(), nextKey()];
    await flaky('retry-in', retried, 1000);
    await flaky('discard', discarded);
    await flaky('dead-letter', deadLettered);
    await waitFor('the retried job done', async () => (await raw.count(done())) === 1);
    await waitFor('one dead letter', async () => (await raw.count(dead())) === 1);
    const [d] = await raw.drain(dead());
    expect(body(d).args[1]).to.equal(deadLettered);
    expect(d.properties.headers).to.include({ 'x-ojs-error-type': 'Hopeless', 'x-ojs-attempt': 1 });
    expect(seen.get(discarded)).to.have.length(1);
    const waited = (seen.get(retried) ?? []).map((a) => a.at);
    expect(waited[1] - waited[0]).to.be.within(500, 2000);
  });

  it('dead-letters non-retryable error types at once, and discards on exhaustion when the job asks', async () => {
    const [typed, discard] = [nextKey(), nextKey()];
    await flaky('typed', typed, 'Validation.Email');
    await flaky('always', discard, undefined, { retry: { max_attempts: 1, on_exhaustion: 'discard' } });
    await waitFor('the typed failure dead', async () => (await raw.count(dead())) === 1);
    await waitFor('the discarded job tried', () => seen.get(discard)?.length === 1);
    expect(seen.get(typed)).to.have.length(1);
    const [d] = await raw.drain(dead());
    expect(body(d).args[1]).to.equal(typed);
    expect(body(d).error?.type).to.equal('Validation.Email');
  });

  it("honours a queue's dead_letter_queue: exhausted jobs are enqueued there with their error", async () => {
    const id = await publisher.publish('fragile', { type: 'x', args: ['f1'], tenant: 'acme' });
    await waitFor('the job in quarantine', async () => (await raw.count(names.queue('quarantine', 'acme'))) === 1);
    const [q] = await raw.drain(names.queue('quarantine', 'acme'));
    const job = body(q);
    expect(job).to.include({ id, queue: 'quarantine', tenant: 'acme' });
    expect(job.error).to.include({ type: 'TypeError', message: 'fragile f1' });
    expect(job.meta).to.include({ original_queue: 'fragile', stage: 'fragile' });
    expect(await raw.count(names.deadQueue('fragile', 'acme'))).to.equal(0);
  });

  it('refuses an invalid retry policy at publish with INVALID_RETRY_POLICY', async () => {
    const refused = await flaky('ok', nextKey(), undefined, { retry: { max_attempts: 0 } }).catch((e: unknown) => e);
    expect(refused).to.have.property('code', 'INVALID_RETRY_POLICY');
  });

  it('aborts ctx.signal with DELIVERY_LOST when the connection carrying the delivery dies, and publishes nothing of that run', async () => {
    const k = nextKey();
    await flaky('hold', k);
    await waitFor('the handler holding the job', () => seen.get(k)?.length === 1);
    expect(await closeConnections(`stagecoach flaky,fragile [${config.prefix}]`, 'test: delivery lost')).to.equal(1);
    await waitFor('the handler told of the loss', () => abortReasons.has(k), 10_000);
    expect(abortReasons.get(k), 'the abort reason (not "not aborted": its 8 s wait ran out)').to.equal('DELIVERY_LOST');
    await waitFor('its emit after the loss refused', () => lateEmits.has(k));
    expect(lateEmits.get(k)).to.equal('DELIVERY_LOST');
    // The broker delivers it again after the reconnection: that run's output is the only one.
    await waitFor('the job run again, done', async () => (await raw.count(done())) === 1, 20_000);
    const [result] = await raw.drain(done());
    expect(body(result).args[1], 'the output of the second run').not.to.equal('late');
    await waitFor('the group ready again', () => group.readiness().ready, 20_000);
    expect(await raw.count(done())).to.equal(0);
  });

  it('dead-letters with its reason what cannot carry it whole: a huge error, huge headers, args nested 10,000 deep', async () => {
    const k = nextKey();
    const huge = await flaky('huge-error', k, 100_000, { retry: { max_attempts: 1 } });
    const ct = 'application/openjobspec+json';
    const big = { 'x-ojs-tenant': 'acme', 'x-big': 'b'.repeat(62 * 1024), 'x-small': 'kept' };
    await raw.publish('', work(), JSON.stringify({ id: 'big-headers', type: 'flaky', queue: 'work', args: ['ok', 'h'] }), {
      headers: big,
      contentType: ct,
      messageId: 'big-headers',
    });
    // Written out: JSON.stringify itself cannot take it.
    const deep = `{"id":"deep","type":"flaky","queue":"work","args":["ok","d",${'['.repeat(10_000)}${']'.repeat(10_000)}]}`;
    await raw.publish('', work(), deep, { headers: { 'x-ojs-tenant': 'acme' }, contentType: ct, messageId: 'deep' });
    await waitFor('three dead letters', async () => (await raw.count(dead())) === 3);
    const letters = await raw.drain(dead());
    const byId = new Map(letters.map((letter) => [letter.properties.messageId as string, letter]));
    const hugeLetter = byId.get(huge);
    const headers = (id: string): Record<string, unknown> => byId.get(id)?.properties.headers ?? {};
    expect(headers(huge)['x-ojs-error-type'], 'the handler error keeps its type').to.equal('Error');
    expect(String(headers(huge)['x-ojs-error-message'])).to.match(/^huge x+.*cut\]$/);
    expect(Buffer.byteLength(String(headers(huge)['x-ojs-error-message']))).to.be.at.most(1024);
    expect(hugeLetter && body(hugeLetter).error?.message.length).to.be.at.most(1024);
    expect(headers('big-headers')).to.include({
      'x-ojs-error-type': 'INVALID_PAYLOAD',
      'x-small': 'kept',
      'x-ojs-dropped-headers': 'x-big',
    });
    expect(String(headers('big-headers')['x-ojs-error-message'])).to.match(/the headers take \d+ bytes/);
    expect(headers('big-headers')).not.to.have.property('x-big');
    expect(headers('deep')).to.include({ 'x-ojs-error-type': 'INVALID_PAYLOAD' });
    expect(String(headers('deep')['x-ojs-error-message'])).to.match(/nested deeper than 512 levels/);
    expect(byId.get('deep')?.content.toString(), 'the body is kept byte for byte').to.equal(deep);
    expect(seen.get('h'), 'refused before its handler').to.equal(undefined);
  });

  it('dead-letters ten kinds of malformed messages with a reason each, and keeps processing good jobs', async () => {
    const ct = 'application/openjobspec+json';
    const h = { 'x-ojs-tenant': 'acme' };
    const good = { id: 'g', type: 'flaky', queue: 'work', args: ['ok', 'g'] };
    const malformed: Array<[string | Buffer, string | undefined, RegExp]> = [
      ['{oops', ct, /not JSON/],
      ['', ct, /not JSON/],
      [Buffer.from([0xff, 0xfe, 0x00]), ct, /not JSON/],
      ['"a string"', ct, /not an OJS envelope/],
      ['null', ct, /not an OJS envelope/],
      ['[1,2,3]', ct, /not an OJS envelope/],
      [JSON.stringify({ ...good, id: undefined }), ct, /"id"/],
      [JSON.stringify({ ...good, type: '' }), ct, /"type"/],
      [JSON.stringify({ ...good, args: 'x' }), ct, /"args"/],
      [JSON.stringify({ ...good, meta: 5 }), ct, /"meta"/],
      [JSON.stringify({ ...good, attempt: -1 }), ct, /"attempt"/],
      [JSON.stringify(good), 'text/xml', /content type/],
      [JSON.stringify({ ...good, type: 'other' }), ct, /does not handle job type "other"/],
      [JSON.stringify({ ...good, tenant: 'globex' }), ct, /names tenant "globex"/],
    ];
    for (const [content, contentType] of malformed) {
      await raw.publish('', work(), content, { headers: h, ...(contentType ? { contentType } : {}) });
    }
    const k = nextKey();
    await flaky('ok', k);
    await waitFor('every malformed message dead', async () => (await raw.count(dead())) === malformed.length);
    await waitFor('the good job done', async () => (await raw.count(done())) === 1);
    const letters = await raw.drain(dead());
    letters.forEach((letter, i) => {
      expect(letter.properties.headers?.['x-ojs-error-type'], `message ${i}`).to.equal('INVALID_PAYLOAD');
      expect(String(letter.properties.headers?.['x-ojs-error-message']), `message ${i}`).to.match(malformed[i][2]);
    });
    expect(letters[0].content.toString(), 'the body is kept byte for byte').to.equal('{oops');
    const runner = group.runners.find((r) => r.name === 'flaky/acme');
    // The dead letters can be on the broker a moment before the runner has counted them.
    await waitFor('the stage to count them', () => (runner?.stats.deadLettered ?? 0) >= malformed.length, 5000);
  });
});

describe('the delay ladder on the broker', () => {
  let raw: RawBroker;
  before(async () => {
    raw = await RawBroker.connect();
  });
  after(async () => raw.close());

  it('declares the same delay queues for 1 tenant as for 50', async function () {
    // 51 tenants declared and deleted: 16 s alone, and more than the default 30 s under load.
    this.timeout(120_000);
    const stages = [{ name: 's', input: 'q', outputs: ['r'] }];
    const one = withTestConfig({ tenants: ['t0'] });
    const fifty = withTestConfig({ tenants: Array.from({ length: 50 }, (_, i) => `t${i}`) });
    try {
      const ladder = (c: CompiledConfig): string[] =>
        provisionTopology(c, stages)
          .queues.map((q) => q.name.slice(c.prefix.length))
          .filter((n) => n.startsWith('.delay.'));
      await declareTopologyOnce(one, provisionTopology(one, stages), log);
      await declareTopologyOnce(fifty, provisionTopology(fifty, stages), log);
      expect(ladder(fifty)).to.deep.equal(ladder(one));
      expect(ladder(one)).to.have.length(DELAY_LEVELS);
      for (const level of ladder(fifty)) expect(await raw.exists(`${fifty.prefix}${level}`), level).to.equal(true);
      expect(await raw.exists(`${fifty.prefix}.delay.${DELAY_LEVELS}`)).to.equal(false);
    } finally {
      await teardown(one, stages);
      await teardown(fifty, stages);
    }
  });

  it('parks a 24 h delay in the 2^16 s level first (86400 = 2^16 + 20864)', async () => {
    const config = withTestConfig({ tenants: ['acme'] });
    const stages = [{ name: 's', input: 'q', outputs: [] }];
    const names = new BrokerNames(config.prefix);
    try {
      await declareTopologyOnce(config, provisionTopology(config, stages), log);
      await raw.publish(names.retry, delayRoutingKey(86_400_000, names.queue('q', 'acme')), '{}');
      await waitFor('the job in level 16', async () => (await raw.count(names.delayLevel(16))) === 1);
      const levels = await raw.counts(Array.from({ length: DELAY_LEVELS }, (_, k) => names.delayLevel(k)));
      expect(Object.values(levels).reduce((a, b) => (a ?? 0) + (b ?? 0), 0)).to.equal(1);
    } finally {
      await teardown(config, stages);
    }
  });
});
