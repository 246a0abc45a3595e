import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { hostAllowed } from '../../src/http-api/host-check.js';
import { ApiError, toOjsError } from '../../src/http-api/api-error.js';
import { checkBearer } from '../../src/http-api/bearer-auth.js';
import { ConfigFile, Serializer } from '../../src/http-api/config-file.js';
import { configView, stateView } from '../../src/http-api/queue-views.js';
import { Router, type Route } from '../../src/http-api/router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { ConfigError, StagecoachError } from '../../src/errors/errors.js';
import { buildQueueReports } from '../../src/inspect/queue-report.js';

function thrown(action: () => unknown): unknown {
  try {
    action();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('admin API: bearer token', () => {
  it('accepts the token and refuses anything else with a 401', () => {
    expect(() => checkBearer('Bearer s3cret', 's3cret')).not.to.throw();
    expect(() => checkBearer('bearer s3cret', 's3cret')).not.to.throw();
    for (const header of [undefined, '', 'Bearer', 'Bearer s3cre', 'Bearer s3cretx', 'Basic s3cret', 's3cret']) {
      const err = thrown(() => checkBearer(header, 's3cret'));
      expect(err, String(header)).to.be.instanceOf(ApiError);
      expect((err as ApiError).status).to.equal(401);
      expect((err as ApiError).code).to.equal('UNAUTHORIZED');
    }
  });

  it('refuses every change when no token is configured, saying how to set one', () => {
    for (const token of [undefined, '']) {
      const err = thrown(() => checkBearer('Bearer anything', token)) as ApiError;
      expect(err.status).to.equal(401);
      expect(err.message).to.contain('STAGECOACH_ADMIN_TOKEN');
    }
  });
});

describe('admin API: router', () => {
  const route = (method: Route['method'], p: string): Route => ({
    method,
    path: p,
    mutating: method !== 'GET',
    handle: async () => ({ status: 200, body: p }),
  });
  const router = new Router([
    route('GET', '/q/{name}/config'),
    route('GET', '/q/_default/config'),
    route('PUT', '/q/{name}/config'),
    route('GET', '/q'),
  ]);

  it('prefers literal segments, decodes parameters, and ignores a trailing slash', () => {
    expect(router.match('GET', '/q/_default/config').route.path).to.equal('/q/_default/config');
    expect(router.match('GET', '/q/my%2Dqueue/config').params).to.deep.equal({ name: 'my-queue' });
    expect(router.match('GET', '/q/').route.path).to.equal('/q');
  });

  it('answers 404 for an unknown path and 405 naming the allowed methods', () => {
    expect((thrown(() => router.match('GET', '/elsewhere')) as ApiError).status).to.equal(404);
    const err = thrown(() => router.match('DELETE', '/q/x/config')) as ApiError;
    expect(err.status).to.equal(405);
    expect(err.details).to.deep.equal({ allowed: ['GET', 'PUT'] });
  });
});

describe('admin API: OJS error objects', () => {
  it('maps codes to statuses and hides unexpected errors', () => {
    expect(toOjsError(new StagecoachError('NOT_FOUND', 'gone')).status).to.equal(404);
    expect(toOjsError(new StagecoachError('CONFLICT', 'busy')).status).to.equal(409);
    const config = toOjsError(new ConfigError('/etc/s.json', 'queues.x.max_size', 'an integer'));
    expect(config.status).to.equal(422);
    expect(config.body.error.details).to.deep.equal({ key: 'queues.x.max_size', expected: 'an integer' });
    expect(toOjsError(new StagecoachError('MANAGEMENT_FAILED', 'down')).body.error.retryable).to.equal(true);
    const internal = toOjsError(new TypeError('secret detail'));
    expect(internal.status).to.equal(500);
    expect(internal.body.error.message).not.to.contain('secret');
  });
});

describe('admin API: the configuration file', () => {
  let dir: string;
  let file: string;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-admin-unit-'));
    file = path.join(dir, 'stagecoach.json');
    await writeFile(file, JSON.stringify({ queues: { a: { max_size: 1 } } }));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('writes what compiles, atomically, without environment overrides', async () => {
    const store = new ConfigFile(file, { AMQP_URL: 'amqp://elsewhere:5672/' });
    const raw = await store.readRaw();
    const compiled = await store.write({ ...raw, queues: { a: { max_size: 2 } } });
    expect(compiled.broker.url).to.equal('amqp://elsewhere:5672/');
    expect(JSON.parse(await readFile(file, 'utf8'))).to.deep.equal({ queues: { a: { max_size: 2 } } });
    expect(await readdir(dir), 'no temporary file left').to.deep.equal(['stagecoach.json']);
  });

  it('writes nothing that does not compile', async () => {
    const store = new ConfigFile(file, {});
    const before = await readFile(file, 'utf8');
    let err: unknown;
    try {
      await store.write({ queues: { a: { max_size: -1 } } });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
    expect(await readFile(file, 'utf8')).to.equal(before);
  });

  it('runs changes one after another, a failure not stopping the next', async () => {
    const serializer = new Serializer();
    const order: string[] = [];
    const slow = serializer.run(async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      order.push('slow');
      throw new Error('failed');
    });
    const fast = serializer.run(async () => void order.push('fast'));
    await slow.catch(() => undefined);
    await fast;
    expect(order).to.deep.equal(['slow', 'fast']);
  });
});

describe('inspection reports', () => {
  const config = compileConfig({
    prefix: 'ojs',
    tenants: ['acme'],
    queues: { conv: { max_size: 10, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } } },
  });
  const sampled = (name: string, ready: number, extra: object = {}) => ({
    name,
    messages_ready: ready,
    messages_unacknowledged: 0,
    consumers: 0,
    ...extra,
  });

  it('reads queues, states and bounds from the management lists', () => {
    const reports = buildQueueReports(
      config,
      [
        sampled('ojs.queue.conv.acme', 4, { policy: 'ojs.queue.conv', effective_policy_definition: { 'max-length': 10 } }),
        sampled('ojs.queue.conv.acme.pdf', 0, { arguments: { 'x-max-length': 5 } }),
        sampled('ojs.due.conv.acme.pdf', 0),
        sampled('ojs.dead.conv.acme', 2),
        sampled('ojs.queue.other', 0),
        sampled('elsewhere.queue.conv.acme', 9),
      ],
      ['ojs.state.draining.conv.acme', 'ojs.state.paused.other'],
    );
    expect(reports.map((r) => [r.name, r.state, r.drained])).to.deep.equal([
      ['ojs.queue.conv.acme', 'draining', false],
      ['ojs.queue.conv.acme.pdf', 'draining', true],
      ['ojs.queue.other', 'paused', false],
    ]);
    expect(reports[0]).to.include({ max_size: 10, max_size_source: 'policy ojs.queue.conv', configured_max_size: 10, max_size_use: 0.4 });
    expect(reports[0].dead).to.deep.equal({ name: 'ojs.dead.conv.acme', exists: true, ready: 2, unacked: 0 });
    expect(reports[1]).to.include({ max_size: 5, max_size_source: 'argument' });
    expect(reports[2]).to.include({ scope: 'shared', max_size: null, configured_max_size: null });
    expect(stateView(reports)).to.deep.equal({ state: 'mixed', drained: false, states: { draining: 2, paused: 1 } });
  });

  it("shows a queue's flow limits in its effective configuration, the tenant's own first", () => {
    const limited = compileConfig({
      tenants: ['acme', { name: 'globex', queues: { conv: { concurrency: 1 } } }],
      queues: { conv: { concurrency: 5, rate_limit: { limit: 20, period: 'PT1S' } }, free: {} },
    });
    expect(configView(limited, 'conv')).to.deep.include({ concurrency: 5, rate_limit: { limit: 20, period: 'PT1S' } });
    expect(configView(limited, 'conv', 'globex')).to.deep.include({ concurrency: 1, rate_limit: { limit: 20, period: 'PT1S' } });
    expect(configView(limited, 'free')).to.include({ concurrency: null, rate_limit: null });
  });

  it('never calls a queue drained before its counts are sampled', () => {
    const [report] = buildQueueReports(config, [{ name: 'ojs.queue.conv.acme' }], ['ojs.state.draining.conv.acme']);
    expect(report).to.include({ state: 'draining', drained: false, ready: null });
  });
});

describe('admin API: Host header of a loopback server (DNS rebinding)', () => {
  it('answers requests naming a loopback host only, when bound to loopback', () => {
    for (const host of ['127.0.0.1:9500', 'localhost:9500', 'localhost', '[::1]:9500'])
      expect(hostAllowed('127.0.0.1', host), host).to.equal(true);
    for (const host of ['evil.example:9500', 'attacker.test', '', undefined])
      expect(hostAllowed('127.0.0.1', host), String(host)).to.equal(false);
  });

  it('answers any name when bound elsewhere on purpose', () => {
    expect(hostAllowed('0.0.0.0', 'admin.internal:9500')).to.equal(true);
  });
});
