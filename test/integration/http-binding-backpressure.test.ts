import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { QueueFullError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json, type OjsAnswer } from '../helpers/ojs-client.js';

const TOKEN = 'test-http-binding-backpressure-token-0123456789';
const ojs = ojsClient(TOKEN);
const log = createLogger({ test: 'http-binding-backpressure' }, 'error');

describe('the HTTP binding: queue bounds (ojs-backpressure) through queue configuration', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;

  const bound = (queue: string, backpressure: Json, query = ''): Promise<OjsAnswer> =>
    ojs(base, 'PUT', `/ojs/v1/admin/queues/${queue}/config${query}`, { backpressure });
  const push = (queue: string, n: number, tenant?: string): Promise<OjsAnswer> =>
    ojs(base, 'POST', '/ojs/v1/jobs', { type: 'bp.probe', args: [n], options: { queue } }, tenant === undefined ? {} : { tenant });
  const statuses = async (queue: string, count: number, tenant?: string): Promise<number[]> => {
    const answers: number[] = [];
    for (let n = 1; n <= count; n++) answers.push((await push(queue, n, tenant)).status);
    return answers;
  };
  const pressure = (answer: OjsAnswer): (string | null)[] =>
    ['x-ojs-queue-depth', 'x-ojs-queue-bound', 'x-ojs-queue-pressure'].map((name) => answer.headers.get(name));
  const ownEntry = async (queue: string): Promise<Json | undefined> =>
    (JSON.parse(await readFile(project.file, 'utf8')) as { queues?: Record<string, Json> }).queues?.[queue];

  before(async () => {
    binding = await startBindingServer(
      { tenants: ['acme', 'globex'], queues: { _default: { scope: 'shared' }, tenanted: { scope: 'tenant' } }, stages: {} },
      'http-binding-backpressure',
      TOKEN,
    );
    ({ project, base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it('bounds a queue before its first push: near the bound a push carries its pressure, past it 429 QUEUE_FULL with depth and bound', async () => {
    const put = await bound('burst', { max_depth: 4, strategy: 'reject', warning_threshold: 0.5 });
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    expect(put.body.backpressure).to.deep.equal({ max_depth: 4, max_size_bytes: 0, strategy: 'reject', warning_threshold: 0.5 });
    expect(await ownEntry('burst')).to.deep.equal({ max_size: 4, overflow_policy: 'reject', max_size_warning: 0.5 });
    const answers: OjsAnswer[] = [];
    for (const n of [1, 2, 3, 4, 5]) answers.push(await push('burst', n));
    expect(answers.map((a) => a.status)).to.deep.equal([201, 201, 201, 201, 429]);
    // Below half of the bound nothing; from there the depth, the bound and their ratio.
    expect(pressure(answers[0])).to.deep.equal([null, null, null]);
    expect(pressure(answers[1])).to.deep.equal(['2', '4', '0.5']);
    expect(pressure(answers[3])).to.deep.equal(['4', '4', '1']);
    const refused = answers[4];
    expect(refused.headers.get('retry-after')).to.equal('1');
    expect(pressure(refused)).to.deep.equal(['4', '4', '1']);
    expect(refused.body.error).to.include({ code: 'QUEUE_FULL', retryable: true });
    expect(refused.body.error.details).to.include({ queue: 'burst', depth: 4, bound: 4, strategy: 'reject' });
    expect(await project.raw.count(project.names.queue('burst'))).to.equal(4);
    const stats = await ojs(base, 'GET', '/ojs/v1/queues/burst/stats');
    expect(stats.body.stats).to.include({ queue: 'burst', depth: 4, max_depth: 4 });
    const read = await ojs(base, 'GET', '/ojs/v1/admin/queues/burst/config');
    expect(read.body).to.deep.equal({ name: 'burst', backpressure: put.body.backpressure });
    expect((await ojs(base, 'GET', '/ojs/manifest')).body.extensions).to.include('backpressure');
  });

  it("a native Publisher is refused by the same bound as an HTTP push, and the bound's removal (0) lets both in", async () => {
    expect((await bound('shared-bound', { max_depth: 1 })).status).to.equal(200);
    expect((await push('shared-bound', 1)).status).to.equal(201);
    const publisher = await Publisher.connect(project.config, { log });
    try {
      const refused = await publisher.publish('shared-bound', { type: 'bp.native', args: [] }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).to.be.instanceOf(QueueFullError);
      const lifted = await bound('shared-bound', { max_depth: 0 });
      expect(lifted.body.config).to.include({ max_size: null });
      await publisher.publish('shared-bound', { type: 'bp.native', args: [] });
    } finally {
      await publisher.close();
    }
    expect((await push('shared-bound', 3)).status).to.equal(201);
    expect(await project.raw.count(project.names.queue('shared-bound'))).to.equal(3);
  });

  it("bounds each tenant's queue on its own: a tenant's full queue refuses none of another tenant's pushes", async () => {
    expect((await bound('tenanted', { max_depth: 1 })).status).to.equal(200);
    expect(await statuses('tenanted', 2, 'acme')).to.deep.equal([201, 429]);
    expect(await statuses('tenanted', 2, 'globex')).to.deep.equal([201, 429]);
    // A tenant's own bound (its settings of the queue) changes its queue only.
    const own = await bound('tenanted', { max_depth: 3 }, '?tenant=globex');
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    expect(own.body.backpressure).to.include({ max_depth: 3 });
    expect(await statuses('tenanted', 3, 'globex')).to.deep.equal([201, 201, 429]);
    expect(await statuses('tenanted', 1, 'acme')).to.deep.equal([429]);
    expect(await project.raw.count(project.names.queue('tenanted', 'acme'))).to.equal(1);
    expect(await project.raw.count(project.names.queue('tenanted', 'globex'))).to.equal(3);
  });

  it('refuses a batch that does not fit whole, nothing enqueued; one that fits is taken', async () => {
    expect((await bound('batched', { max_depth: 2, strategy: 'reject' })).status).to.equal(200);
    const jobs = (count: number): Json => ({
      jobs: Array.from({ length: count }, (_, n) => ({ type: 'bp.batch', args: [n], options: { queue: 'batched' } })),
    });
    const refused = await ojs(base, 'POST', '/ojs/v1/jobs/batch', jobs(3));
    expect(refused.status, JSON.stringify(refused.body)).to.equal(429);
    expect(refused.body.error).to.include({ code: 'QUEUE_FULL' });
    expect(refused.headers.get('retry-after')).to.equal('1');
    expect(pressure(refused)).to.deep.equal(['0', '2', '0']);
    expect(await project.raw.count(project.names.queue('batched'))).to.equal(0);
    expect((await ojs(base, 'POST', '/ojs/v1/jobs/batch', jobs(2))).status).to.equal(201);
    expect(await project.raw.count(project.names.queue('batched'))).to.equal(2);
  });

  it("refuses bad input with 400 naming the field, and a tenant's token with 403", async () => {
    const cases: [Json, string][] = [
      [{ max_depth: -1 }, 'backpressure.max_depth'],
      [{ max_depth: 1.5 }, 'backpressure.max_depth'],
      [{ strategy: 'drop_newest' }, 'backpressure.strategy'],
      [{ warning_threshold: 2 }, 'backpressure.warning_threshold'],
      [{ max_queue: 3 }, 'backpressure.max_queue'],
    ];
    for (const [backpressure, field] of cases) {
      const answer = await bound('refused', backpressure);
      expect(answer.status, JSON.stringify(backpressure)).to.equal(400);
      expect(answer.body.error.message).to.include(field);
    }
    const other = await ojs(base, 'PUT', '/ojs/v1/admin/queues/refused/config', { max_size: 3 });
    expect(other.status).to.equal(400);
    expect(other.body.error.message).to.include('max_size');
    expect(await ownEntry('refused')).to.equal(undefined);
    const asTenant = await ojs(
      base,
      'PUT',
      '/ojs/v1/admin/queues/tenanted/config',
      { backpressure: { max_depth: 9 } },
      {
        token: tenantToken(TOKEN, project.config.prefix, 'acme'),
      },
    );
    expect(asTenant.status).to.equal(403);
  });
});
