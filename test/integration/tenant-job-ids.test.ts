import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { uuidv7 } from '../../src/job/uuid-v7.js';
import { tenantJobId } from '../../src/job/tenant-ids.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import { ojsClient, type Json, type OjsAnswer } from '../helpers/ojs-client.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-tenant-job-ids-token-0123456789';
const ojs = ojsClient(TOKEN);

/** An answer with its values' kinds only: what two answers must share when only ids and times differ. */
function shapeOf(answer: OjsAnswer): Record<string, unknown> {
  const job = (answer.body.job ?? {}) as Json;
  return { status: answer.status, fields: Object.keys(job).sort(), state: job.state, tenant: job.tenant, error: answer.body.error?.code };
}

/**
 * Job ids a tenant's client chooses are its own (docs/security.md, "Job ids are per tenant"): the
 * same id from another tenant names another job, and no answer tells one tenant that another uses
 * an id.
 */
describe('job ids are per tenant on the HTTP binding', function () {
  this.timeout(90_000);
  let binding: BindingServer | undefined;
  let base: string;
  let acme: { token: string };
  let globex: { token: string };

  before(async () => {
    binding = await startBindingServer(
      { tenants: ['acme', 'globex'], queues: { _default: { scope: 'tenant' }, convert: {} }, stages: {} },
      'tenant-job-ids',
      TOKEN,
    );
    base = binding.base;
    acme = { token: tenantToken(TOKEN, binding.project.config.prefix, 'acme') };
    globex = { token: tenantToken(TOKEN, binding.project.config.prefix, 'globex') };
  });

  after(async () => {
    await binding?.close();
  });

  const push = (as: { token: string }, id: string, args: unknown[]): Promise<OjsAnswer> =>
    ojs(base, 'POST', '/ojs/v1/jobs', { id, type: 'doc.convert', args, options: { queue: 'convert' } }, as);

  it("an id another tenant holds is answered as an unused one, and each tenant's id reaches its own job", async () => {
    const shared = uuidv7();
    expect((await push(globex, shared, ['g'])).status).to.equal(201);
    const ours = await push(acme, shared, ['a']);
    const unused = await push(acme, uuidv7(), ['a']);
    expect(ours.status, JSON.stringify(ours.body)).to.equal(201);
    expect(shapeOf(ours)).to.deep.equal(shapeOf(unused));
    expect(ours.body.job).to.include({ id: shared, tenant: 'acme' });
    // Each token reads its own job by the id it gave.
    const mine = await ojs(base, 'GET', `/ojs/v1/jobs/${shared}`, undefined, acme);
    expect(mine.body.job).to.include({ id: shared, tenant: 'acme' });
    expect(mine.body.job.args).to.deep.equal(['a']);
    const theirs = await ojs(base, 'GET', `/ojs/v1/jobs/${shared}`, undefined, globex);
    expect(theirs.body.job).to.include({ id: shared, tenant: 'globex' });
    expect(theirs.body.job.args).to.deep.equal(['g']);
    // Its own id again is a duplicate (OJS), for each tenant, alone and in a batch.
    expect((await push(acme, shared, ['again'])).status).to.equal(409);
    expect((await push(globex, shared, ['again'])).status).to.equal(409);
    const batch = { jobs: [{ id: shared, type: 'doc.convert', args: [], options: { queue: 'convert' } }] };
    expect((await ojs(base, 'POST', '/ojs/v1/jobs/batch', batch, acme)).status).to.equal(409);
    // An id the server gave its own job is its own too; another tenant may use it.
    const drawn = (await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'doc.convert', args: [], options: { queue: 'convert' } }, acme)).body.job
      .id as string;
    expect((await push(acme, drawn, [])).status).to.equal(409);
    expect((await push(globex, drawn, [])).status).to.equal(201);
    // A batch with an id only the other tenant holds is pushed.
    const theirsOnly = uuidv7();
    expect((await push(globex, theirsOnly, ['g'])).status).to.equal(201);
    const batched = await ojs(base, 'POST', '/ojs/v1/jobs/batch', { jobs: [{ ...batch.jobs[0], id: theirsOnly }] }, acme);
    expect(batched.status, JSON.stringify(batched.body)).to.equal(201);
    expect(batched.body.jobs[0]).to.include({ id: theirsOnly, tenant: 'acme' });
    // Cancelling one leaves the other waiting.
    await waitFor(
      "the store to know acme's job",
      async () => (await ojs(base, 'GET', `/ojs/v1/jobs/${shared}/status`, undefined, acme)).status === 200,
    );
    const cancelled = await ojs(base, 'DELETE', `/ojs/v1/jobs/${shared}`, undefined, acme);
    expect(cancelled.status, JSON.stringify(cancelled.body)).to.equal(200);
    expect(cancelled.body.job).to.include({ id: shared, tenant: 'acme' });
    await waitFor(
      "acme's job to be cancelled",
      async () => (await ojs(base, 'GET', `/ojs/v1/jobs/${shared}`, undefined, acme)).body.job?.state === 'cancelled',
    );
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${shared}`, undefined, globex)).body.job).to.include({
      state: 'available',
      tenant: 'globex',
    });
    // The admin reaches each as its tenant names it.
    const admin = await ojs(base, 'GET', `/ojs/v1/jobs/${shared}`, undefined, { tenant: 'globex' });
    expect(admin.body.job).to.include({ id: shared, tenant: 'globex', state: 'available' });
  });

  it("a tenant's worker fetches, reports on and acknowledges its job by its own id; the other tenant's stays", async () => {
    const shared = uuidv7();
    expect((await push(globex, shared, ['g'])).status).to.equal(201);
    expect((await push(acme, shared, ['a'])).status).to.equal(201);
    const fetched = await ojs(
      base,
      'POST',
      '/ojs/v1/workers/fetch',
      { queues: ['convert'], wait_ms: 5000, count: 10, worker_id: 'w' },
      acme,
    );
    const job = (fetched.body.jobs as Json[]).find((candidate) => candidate.id === shared);
    expect(job, JSON.stringify(fetched.body)).to.not.equal(undefined);
    expect(job?.args).to.deep.equal(['a']);
    const beat = await ojs(base, 'POST', '/ojs/v1/workers/heartbeat', { worker_id: 'w', active_job_ids: [shared] }, acme);
    expect(beat.body.jobs_extended).to.deep.equal([shared]);
    expect((await ojs(base, 'PUT', `/ojs/v1/jobs/${shared}/progress`, { progress: 0.5 }, acme)).body).to.include({
      job_id: shared,
      state: 'active',
    });
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${shared}/progress`, undefined, globex)).body).to.include({
      state: 'available',
      progress: null,
    });
    const acked = await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: shared, result: { ok: true } }, acme);
    expect(acked.status, JSON.stringify(acked.body)).to.equal(200);
    expect(acked.body).to.include({ job_id: shared });
    expect(acked.body.job).to.include({ id: shared, state: 'completed' });
    // The other tenant's ack of the same id reaches its own job only, which it never fetched.
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: shared }, globex)).status).to.equal(409);
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${shared}`, undefined, globex)).body.job).to.include({ state: 'available' });
  });

  it("a child pushed under its parent's own id is the same child whichever of the parent's ids the worker names", async () => {
    const parent = uuidv7();
    expect((await push(acme, parent, ['p'])).status).to.equal(201);
    const child = (parentId: string): Json => ({
      type: 'doc.convert',
      args: ['c'],
      meta: { parent_id: parentId, idempotency_key: 'page-1' },
      options: { queue: 'convert' },
    });
    const first = await ojs(base, 'POST', '/ojs/v1/jobs', child(parent), acme);
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    // After a restart the worker is shown the parent's kept id: the same child, not a second one.
    const again = await ojs(base, 'POST', '/ojs/v1/jobs', child(tenantJobId('acme', parent)), acme);
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
    expect(again.body).to.include({ deduplicated: true });
    expect(again.body.job.id).to.equal(first.body.job.id);
    // The job store files it under its parent's kept id, the parent's row.
    const filed = await waitFor('the store to know the child', async () => {
      const status = await ojs(base, 'GET', `/ojs/v1/jobs/${first.body.job.id as string}/status`, undefined, acme);
      return status.status === 200 ? status.body : undefined;
    });
    expect(filed.parent_id).to.equal(tenantJobId('acme', parent));
  });

  it("a workflow id another tenant uses starts the tenant's own workflow, never shows the other's", async () => {
    const workflow = (args: unknown[]): Json => ({
      id: 'nightly-scan',
      type: 'chain',
      steps: [{ type: 'doc.convert', args, options: { queue: 'convert' } }],
    });
    const theirs = await ojs(base, 'POST', '/ojs/v1/workflows', workflow(['g']), globex);
    expect(theirs.status, JSON.stringify(theirs.body)).to.equal(201);
    const ours = await ojs(base, 'POST', '/ojs/v1/workflows', workflow(['a']), acme);
    expect(ours.status, JSON.stringify(ours.body)).to.equal(201);
    expect(ours.body.workflow).to.include({ id: 'nightly-scan', tenant: 'acme' });
    expect((await ojs(base, 'GET', '/ojs/v1/workflows/nightly-scan', undefined, acme)).body.workflow).to.include({ tenant: 'acme' });
    expect((await ojs(base, 'GET', '/ojs/v1/workflows/nightly-scan', undefined, globex)).body.workflow).to.include({ tenant: 'globex' });
    const listed = (await ojs(base, 'GET', '/ojs/v1/workflows', undefined, acme)).body.workflows as Json[];
    expect(listed.map((shown) => `${shown.tenant as string}/${shown.id as string}`)).to.deep.equal(['acme/nightly-scan']);
    // The admin sees both, under the ids they are kept by.
    const all = (await ojs(base, 'GET', '/ojs/v1/workflows')).body.workflows as Json[];
    expect(all.map((shown) => shown.id)).to.include.members(['acme:nightly-scan', 'globex:nightly-scan']);
    expect((await ojs(base, 'DELETE', '/ojs/v1/workflows/nightly-scan', undefined, acme)).status).to.equal(200);
    expect((await ojs(base, 'GET', '/ojs/v1/workflows/nightly-scan', undefined, globex)).body.workflow.state).to.not.equal('cancelled');
  });
});
