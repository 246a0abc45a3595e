import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-http-binding-stats-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the HTTP binding: queue statistics and a push rate limit', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;

  const push = async (queue: string, n: number, options: Json = {}, as: { token?: string; tenant?: string } = {}): Promise<string> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'stats.probe', args: [n], options: { queue, ...options } }, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.job.id as string;
  };
  const fetchJobs = async (queue: string, count: number, waitMs: number, as: { token?: string } = {}): Promise<Json[]> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: [queue], count, wait_ms: waitMs, worker_id: 'w1' }, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.jobs as Json[];
  };
  const stats = async (queue: string, as: { token?: string; tenant?: string } = {}): Promise<Json> => {
    const answer = await ojs(base, 'GET', `/ojs/v1/queues/${queue}/stats`, undefined, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body;
  };

  before(async () => {
    binding = await startBindingServer(
      {
        tenants: ['acme', 'globex'],
        queues: { _default: { scope: 'shared' }, counted: {}, limited: {}, both: { scope: 'tenant' } },
        stages: {},
      },
      'http-binding-stats',
      TOKEN,
    );
    ({ project, base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it('counts a queue by state: available, then active once fetched, then completed (today) once acked', async () => {
    for (const n of [1, 2, 3]) await push('counted', n);
    const first = await stats('counted');
    expect(first.queue).to.include({ name: 'counted', available: 3, active: 0, completed: 0, retryable: 0, scheduled: 0 });
    expect(first.stats).to.include({ queue: 'counted', depth: 3 });
    expect(first.created_at).to.be.a('string');
    const [job] = await fetchJobs('counted', 1, 5000);
    expect((await stats('counted')).queue).to.include({ available: 2, active: 1, completed: 0 });
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: job.id, result: { ok: true } })).status).to.equal(200);
    const last = await stats('counted');
    expect(last.queue).to.include({ available: 2, active: 0, completed: 1, completed_today: 1, failed_today: 0 });
    expect(last.updated_at).to.be.a('string');
  });

  it("a tenant's token counts its own tenant's jobs only", async () => {
    const acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    await push('both', 1, {}, acme);
    await push('both', 2, {}, { tenant: 'globex' });
    await push('both', 3, {}, { tenant: 'globex' });
    expect((await stats('both', acme)).queue).to.include({ available: 1, tenant: 'acme' });
    expect((await stats('both')).queue).to.include({ available: 3 });
    expect((await stats('both', { tenant: 'globex' })).queue).to.include({ available: 2 });
    // A tenant's token asking for another tenant is refused.
    expect((await ojs(base, 'GET', '/ojs/v1/queues/both/stats', undefined, { ...acme, tenant: 'globex' })).status).to.equal(403);
  });

  it("a tenant's statistics: its jobs over every queue, for its own token and the admin, never another tenant's token", async () => {
    const acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    const globex = { token: tenantToken(TOKEN, project.config.prefix, 'globex') };
    const before = (await ojs(base, 'GET', '/ojs/v1/admin/tenants/acme/stats', undefined, acme)).body;
    await push('both', 10, {}, acme);
    await push('both', 11, {}, acme);
    const own = await ojs(base, 'GET', '/ojs/v1/admin/tenants/acme/stats', undefined, acme);
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    expect(own.body).to.include({ tenant_id: 'acme', total_jobs: (before.total_jobs as number) + 2 });
    expect(own.body.available).to.equal((before.available as number) + 2);
    const byAdmin = await ojs(base, 'GET', '/ojs/v1/admin/tenants/acme/stats');
    expect(byAdmin.body.total_jobs).to.equal(own.body.total_jobs);
    // The tenant boundary: another tenant's token learns nothing, not even that the tenant exists.
    expect((await ojs(base, 'GET', '/ojs/v1/admin/tenants/acme/stats', undefined, globex)).status).to.equal(404);
    expect((await ojs(base, 'GET', '/ojs/v1/admin/tenants/globex/stats', undefined, acme)).status).to.equal(404);
  });

  it('options.rate_limit max_per_second hands a worker one job a second', async () => {
    for (const n of [1, 2, 3]) await push('limited', n, { rate_limit: { max_per_second: 1 } });
    const taken: number[] = [];
    const started = Date.now();
    await waitFor('three limited jobs fetched', async () => {
      for (const job of await fetchJobs('limited', 3, 500)) {
        taken.push(Date.now() - started);
        await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: job.id });
      }
      return taken.length >= 3 ? taken : undefined;
    });
    // Three starts under one a second take two seconds at least (the first window's one, then one each).
    expect(taken[2] - taken[0]).to.be.at.least(1500);
    expect(
      (
        await ojs(base, 'POST', '/ojs/v1/jobs', {
          type: 'stats.probe',
          args: [],
          options: { queue: 'limited', rate_limit: { max_per_second: 0 } },
        })
      ).status,
    ).to.equal(400);
    // The suite's `rate: N, period: "second"` is a window too.
    await push('limited', 4, { rate_limit: { key: 'words', rate: 2, period: 'second' } });
  });
});
