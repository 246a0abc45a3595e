import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';

const TOKEN = 'test-http-binding-progress-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the HTTP binding: job progress reported by HTTP workers', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;

  before(async () => {
    binding = await startBindingServer(
      { tenants: ['acme', 'globex'], queues: { _default: { scope: 'shared' }, convert: { scope: 'tenant' } }, stages: {} },
      'http-binding-progress',
      TOKEN,
    );
    ({ project, base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it('keeps the latest progress of a claimed job (clamped, never back), shows it in INFO and 1.0 once completed', async () => {
    const acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    const pushed = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'doc.convert', args: ['big.pdf'], options: { queue: 'convert' } }, acme);
    expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
    const id = pushed.body.job.id as string;
    const none = await ojs(base, 'GET', `/ojs/v1/jobs/${id}/progress`, undefined, acme);
    expect(none.status).to.equal(200);
    expect(none.body).to.include({ job_id: id, progress: null });
    // Not active yet: a report is ignored, not refused.
    expect((await ojs(base, 'PUT', `/ojs/v1/jobs/${id}/progress`, { progress: 0.2 }, acme)).body.progress).to.equal(null);
    const fetched = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['convert'], wait_ms: 5000, worker_id: 'w1' }, acme);
    expect((fetched.body.jobs as Json[]).map((job) => job.id)).to.deep.equal([id]);
    const half = await ojs(base, 'PUT', `/ojs/v1/jobs/${id}/progress`, { progress: 0.5, message: 'page 50 of 100' }, acme);
    expect(half.status, JSON.stringify(half.body)).to.equal(200);
    expect(half.body).to.include({ progress: 0.5, message: 'page 50 of 100', state: 'active' });
    expect((await ojs(base, 'PUT', `/ojs/v1/jobs/${id}/progress`, { progress: 0.25 }, acme)).body.progress).to.equal(0.5);
    expect((await ojs(base, 'PUT', `/ojs/v1/jobs/${id}/progress`, { progress: 7, message: 'over' }, acme)).body.progress).to.equal(1);
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${id}/progress`, undefined, acme)).body).to.include({ progress: 1, message: 'over' });
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${id}`, undefined, acme)).body.job).to.include({ progress: 1, progress_message: 'over' });
    // Another tenant's token learns nothing of it, and cannot report on it.
    const globex = { token: tenantToken(TOKEN, project.config.prefix, 'globex') };
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${id}/progress`, undefined, globex)).status).to.equal(404);
    expect((await ojs(base, 'PUT', `/ojs/v1/jobs/${id}/progress`, { progress: 0.9 }, globex)).status).to.equal(404);
    expect((await ojs(base, 'PUT', `/ojs/v1/jobs/${id}/progress`, { progress: 'half' }, acme)).status).to.equal(400);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: id }, acme)).status).to.equal(200);
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${id}/progress`, undefined, acme)).body).to.include({ state: 'completed', progress: 1 });
  });
});
