import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-tenant-batch-ids-token-0123456789';
const ojs = ojsClient(TOKEN);

/**
 * Batch ids are per tenant (docs/security.md): a tenant may put any id in `meta.batch`, and none
 * reaches another tenant's batch or workflow. globex names acme's workflow's batch and a batch id
 * acme uses, first; acme's workflow still starts, runs and completes, and each batch counts its
 * own tenant's jobs only.
 */
describe('batch ids are per tenant', function () {
  this.timeout(90_000);
  let binding: BindingServer | undefined;
  let base: string;
  let acme: { token: string };
  let globex: { token: string };

  before(async () => {
    binding = await startBindingServer(
      { tenants: ['acme', 'globex'], queues: { _default: { scope: 'tenant' }, convert: {} }, stages: {} },
      'tenant-batch-ids',
      TOKEN,
    );
    base = binding.base;
    acme = { token: tenantToken(TOKEN, binding.project.config.prefix, 'acme') };
    globex = { token: tenantToken(TOKEN, binding.project.config.prefix, 'globex') };
  });

  after(async () => {
    await binding?.close();
  });

  const push = (as: { token: string }, batch: string, args: unknown[]): Promise<{ status: number; body: Json }> =>
    ojs(base, 'POST', '/ojs/v1/jobs', { type: 'doc.convert', args, meta: { batch }, options: { queue: 'convert' } }, as);

  /** Fetches acme's next job and acknowledges it. */
  async function workAcme(): Promise<Json> {
    const job = await waitFor("acme's job to fetch", async () => {
      const fetched = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['convert'], wait_ms: 1000, worker_id: 'w' }, acme);
      return (fetched.body.jobs as Json[] | undefined)?.[0];
    });
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: job.id, result: { ok: true } }, acme)).status).to.equal(200);
    return job;
  }

  it("a batch id another tenant named first is the tenant's own: its workflow runs and each batch counts its own jobs", async () => {
    // globex names, first, the batch acme's workflow `nightly` is kept under, and one acme will use.
    expect((await push(globex, 'acme:nightly', ['g'])).status).to.equal(201);
    expect((await push(globex, 'scan-7', ['g'])).status).to.equal(201);

    const started = await ojs(
      base,
      'POST',
      '/ojs/v1/workflows',
      { id: 'nightly', type: 'chain', steps: [{ type: 'doc.convert', args: ['a'], options: { queue: 'convert' } }] },
      acme,
    );
    expect(started.status, JSON.stringify(started.body)).to.equal(201);
    expect(started.body.workflow).to.include({ id: 'nightly', tenant: 'acme' });
    const step = await workAcme();
    expect(step.args).to.deep.equal(['a']);
    const done = await waitFor("acme's workflow to complete", async () => {
      const read = await ojs(base, 'GET', '/ojs/v1/workflows/nightly', undefined, acme);
      return read.body.workflow?.state === 'completed' ? read.body.workflow : undefined;
    });
    expect(done).to.include({ id: 'nightly', tenant: 'acme' });

    // acme's own batch of an id globex used first: its job counts there, globex's in globex's.
    expect((await push(acme, 'scan-7', ['a'])).status).to.equal(201);
    await workAcme();
    const ours = await waitFor("acme's batch to complete", async () => {
      const read = await ojs(base, 'GET', '/ojs/v1/batches/scan-7?tenant=acme');
      return read.body.state === 'completed' ? read.body : undefined;
    });
    expect(ours).to.deep.include({ id: 'scan-7', tenant: 'acme', refused: 0 });
    expect(ours.jobs).to.include({ known: 1, completed: 1, in_flight: 0 });
    const theirs = (await ojs(base, 'GET', '/ojs/v1/batches/scan-7?tenant=globex')).body;
    expect(theirs).to.deep.include({ id: 'scan-7', tenant: 'globex', state: 'running' });
    expect(theirs.jobs).to.include({ known: 1, in_flight: 1 });
    const jobs = (await ojs(base, 'GET', '/ojs/v1/batches/scan-7/jobs?tenant=globex')).body.jobs as Json[];
    expect(jobs.map((job) => job.tenant)).to.deep.equal(['globex']);
    // globex's batch named like acme's workflow is globex's, its job untouched by the workflow.
    const named = (await ojs(base, 'GET', '/ojs/v1/batches/acme:nightly?tenant=globex')).body;
    expect(named).to.deep.include({ tenant: 'globex', state: 'running' });
  });
});
