import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/admin-api/admin-server.js';
import { tenantToken } from '../../src/admin-api/tenant-tokens.js';
import { createLogger } from '../../src/logging/logger.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { AMQP_URL } from '../helpers/raw-broker.js';

const log = createLogger({ test: 'http-binding-progress' }, 'error');
const TOKEN = 'test-http-binding-progress-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the HTTP binding: job progress reported by HTTP workers', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let server: AdminServer;
  let base: string;

  before(async () => {
    project = await writeConfigFile(
      { tenants: ['acme', 'globex'], queues: { _default: { scope: 'shared' }, convert: { scope: 'tenant' } }, stages: {} },
      [],
      'http-binding-progress',
    );
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
    base = `http://127.0.0.1:${server.port}`;
  });

  after(async () => {
    await server?.close();
    await project?.remove();
    if (project !== undefined) await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
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
