import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-admin-api-ojs-paths-token-0123456789';
const ojs = ojsClient(TOKEN);

describe("the admin port: ojs-admin-api's queue pause and resume, and bulk retry", function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;

  const push = async (queue: string, as: { tenant?: string } = {}): Promise<string> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'adm.probe', args: [], options: { queue } }, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.job.id as string;
  };
  const fetchJobs = async (queue: string, waitMs: number, as: { tenant?: string } = {}): Promise<Json[]> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: [queue], count: 5, wait_ms: waitMs, worker_id: 'w1' }, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.jobs as Json[];
  };
  /** Pushes a job that dies at its first failure, fetches and nacks it: a dead letter then. */
  const kill = async (tenant: string): Promise<string> => {
    const id = await push('conversions', { tenant });
    const jobs = await fetchJobs('conversions', 5000, { tenant });
    expect(jobs.map((job) => job.id)).to.deep.equal([id]);
    const nacked = await ojs(
      base,
      'POST',
      '/ojs/v1/workers/nack',
      { job_id: id, error: { code: 'Bad', message: 'unreadable' } },
      { tenant },
    );
    expect(nacked.body).to.include({ state: 'discarded' });
    return id;
  };

  before(async () => {
    binding = await startBindingServer(
      {
        tenants: ['acme', 'globex'],
        queues: {
          _default: { scope: 'shared' },
          work: {},
          conversions: { scope: 'tenant', default_retry: { max_attempts: 1 } },
        },
        stages: {},
      },
      'admin-api-ojs-paths',
      TOKEN,
    );
    ({ project, base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it("pauses a queue at /ojs/v1/admin/queues/{name}/pause (fetches get nothing) and resumes it, in the spec's shape", async () => {
    const id = await push('work');
    const paused = await ojs(base, 'POST', '/ojs/v1/admin/queues/work/pause');
    expect(paused.status, JSON.stringify(paused.body)).to.equal(200);
    expect(paused.body).to.include({ name: 'work', paused: true });
    expect(Number.isNaN(Date.parse(paused.body.paused_at as string))).to.equal(false);
    expect(await fetchJobs('work', 1500)).to.deep.equal([]);
    const resumed = await ojs(base, 'POST', '/ojs/v1/admin/queues/work/resume');
    expect(resumed.status).to.equal(200);
    expect(resumed.body).to.include({ name: 'work', paused: false });
    const got = await waitFor('the job fetched once resumed', async () => {
      const jobs = await fetchJobs('work', 1000);
      return jobs.length > 0 ? jobs : undefined;
    });
    expect(got.map((job) => job.id)).to.deep.equal([id]);
  });

  it('refuses a bulk retry without confirm: true, or with a filter it cannot honour, naming the field (400)', async () => {
    const refused = async (body: Json, field: string): Promise<void> => {
      const answer = await ojs(base, 'POST', '/ojs/v1/admin/jobs/bulk/retry', body);
      expect(answer.status, JSON.stringify(body)).to.equal(400);
      expect(answer.body.error.details.fields, JSON.stringify(body)).to.include(field);
    };
    await refused({ filter: { state: 'discarded', queue: 'conversions' }, confirm: false }, 'confirm');
    await refused({ filter: { state: 'discarded', queue: 'conversions' } }, 'confirm');
    await refused({ confirm: true }, 'filter');
    await refused({ filter: { state: 'discarded' }, confirm: true }, 'filter.queue');
    await refused({ filter: { queue: 'conversions', state: 'completed' }, confirm: true }, 'filter.state');
    await refused({ filter: { queue: 'conversions', type: 'adm.probe' }, confirm: true }, 'filter.type');
  });

  it("retries one tenant's dead letters of a queue in bulk, and no other tenant's", async () => {
    const ours = [await kill('acme'), await kill('acme')];
    await kill('globex');
    const retried = await ojs(base, 'POST', '/ojs/v1/admin/jobs/bulk/retry', {
      filter: { queue: 'conversions', state: 'discarded', tenant: 'acme' },
      confirm: true,
    });
    expect(retried.status, JSON.stringify(retried.body)).to.equal(200);
    expect(retried.body).to.deep.equal({ action: 'retry', matched: 2, succeeded: 2, failed: 0, errors: [] });
    const back = await waitFor('both jobs of acme fetched again', async () => {
      const jobs = await fetchJobs('conversions', 1000, { tenant: 'acme' });
      return jobs.length === 2 ? jobs : undefined;
    });
    expect(back.map((job) => job.id).sort()).to.deep.equal([...ours].sort());
    const theirs = await ojs(base, 'GET', '/ojs/v1/dead-letter?queue=conversions', undefined, { tenant: 'globex' });
    expect(theirs.body.jobs).to.have.length(1);
  });

  it("is the operator's: a tenant's token is 403, no token 401", async () => {
    const acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    for (const route of ['/ojs/v1/admin/queues/work/pause', '/ojs/v1/admin/queues/work/resume', '/ojs/v1/admin/jobs/bulk/retry']) {
      expect((await ojs(base, 'POST', route, { filter: { queue: 'conversions' }, confirm: true }, acme)).status, route).to.equal(403);
      expect((await fetch(`${base}${route}`, { method: 'POST' })).status, route).to.equal(401);
    }
  });
});
