import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { createLogger } from '../../src/logging/logger.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';

const log = createLogger({ test: 'http-binding-dead-letters' }, 'error');
const TOKEN = 'test-http-binding-dlq-token-0123456789';

const ojs = ojsClient(TOKEN);

/**
 * The binding's dead-letter endpoints (backed by the `dead.<queue>` queues, as `stagecoach dead`),
 * its events endpoint (backed by `<prefix>.events`), and the retry timings of its nack and fetch
 * answers (docs/http-binding.md).
 */
describe('the OJS HTTP binding: dead letters, events, retry timings', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let server: AdminServer;
  let base: string;
  let acme: { token: string };

  /** Pushes a job that dies at its first failure, fetches it and nacks it: it is a dead letter then. */
  const kill = async (tenant: string, label: string): Promise<string> => {
    const as = { tenant };
    const pushed = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'doc.convert', args: [label], options: { queue: 'conversions' } }, as);
    expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
    const id = pushed.body.job.id as string;
    const jobs = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['conversions'], wait_ms: 5000 }, as)).body.jobs as Json[];
    expect(jobs.map((job) => job.id)).to.deep.equal([id]);
    const nacked = await ojs(
      base,
      'POST',
      '/ojs/v1/workers/nack',
      { job_id: id, error: { code: 'BadScan', message: `${label} unreadable` } },
      as,
    );
    expect(nacked.body).to.include({ state: 'discarded' });
    return id;
  };

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', 'globex'],
        queues: {
          _default: { scope: 'shared' },
          conversions: { scope: 'tenant', default_retry: { max_attempts: 1 } },
          flaky: { events: true, default_retry: { max_attempts: 3, initial_interval: 'PT1S', backoff_coefficient: 2, jitter: false } },
          noisy: { scope: 'tenant', events: true },
        },
        stages: {},
      },
      [],
      'http-binding-dlq',
    );
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
    base = `http://127.0.0.1:${server.port}`;
    acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
  });

  after(async () => {
    await server?.close();
    await project?.remove();
    if (project !== undefined) await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
  });

  it("lists, retries and deletes dead letters by id, each tenant's own only", async () => {
    const ours = [await kill('acme', 'a1'), await kill('acme', 'a2')];
    const theirs = await kill('globex', 'g1');

    // The admin sees all three; acme's token its two, with their payload and error history.
    const all = (await ojs(base, 'GET', '/ojs/v1/dead-letter?queue=conversions')).body;
    expect(all.jobs.map((job: Json) => job.id).sort()).to.deep.equal([...ours, theirs].sort());
    const listed = (await ojs(base, 'GET', '/ojs/v1/dead-letter', undefined, acme)).body;
    expect(listed.pagination).to.include({ total: 2, offset: 0, has_more: false });
    expect(listed.jobs.map((job: Json) => job.id)).to.deep.equal(ours);
    expect(listed.jobs[0]).to.include({ state: 'discarded', type: 'doc.convert', queue: 'conversions', tenant: 'acme' });
    expect(listed.jobs[0].args).to.deep.equal(['a1']);
    expect(listed.jobs[0].errors.map((error: Json) => [error.type, error.message])).to.deep.equal([['BadScan', 'a1 unreadable']]);
    const page = (await ojs(base, 'GET', '/ojs/v1/dead-letter?limit=1&offset=1', undefined, acme)).body;
    expect(page.jobs.map((job: Json) => job.id)).to.deep.equal([ours[1]]);
    expect(page.pagination).to.include({ total: 2, limit: 1, offset: 1, has_more: false });

    // Another tenant's dead letter does not exist for acme's token.
    expect((await ojs(base, 'POST', `/ojs/v1/dead-letter/${theirs}/retry`, undefined, acme)).status).to.equal(404);
    expect((await ojs(base, 'DELETE', `/ojs/v1/dead-letter/${theirs}`, undefined, acme)).status).to.equal(404);

    // A retry sends it back with a fresh attempt count: available, then fetched at attempt 1, and it completes.
    const retried = await ojs(base, 'POST', `/ojs/v1/dead-letter/${ours[0]}/retry`, undefined, acme);
    expect(retried.status, JSON.stringify(retried.body)).to.equal(200);
    expect(retried.body.job).to.include({ id: ours[0], state: 'available', attempt: 0 });
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${ours[0]}`, undefined, acme)).body.job).to.include({ state: 'available', attempt: 0 });
    const again = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['conversions'], wait_ms: 5000 }, acme)).body.jobs as Json[];
    expect(again.map((job) => [job.id, job.attempt])).to.deep.equal([[ours[0], 1]]);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: ours[0] }, acme)).body.state).to.equal('completed');

    // A delete drops it for good; the other tenant's stays.
    expect((await ojs(base, 'DELETE', `/ojs/v1/dead-letter/${ours[1]}`, undefined, acme)).body).to.deep.equal({
      deleted: true,
      job_id: ours[1],
    });
    expect((await ojs(base, 'DELETE', `/ojs/v1/dead-letter/${ours[1]}`, undefined, acme)).status).to.equal(404);
    expect((await ojs(base, 'GET', '/ojs/v1/dead-letter', undefined, acme)).body.jobs).to.deep.equal([]);
    expect(
      (await ojs(base, 'GET', '/ojs/v1/dead-letter', undefined, { tenant: 'globex' })).body.jobs.map((job: Json) => job.id),
    ).to.deep.equal([theirs]);
  });

  it("lists the events of the prefix: the push's job.enqueued and the ack's job.completed, a tenant's own only, after a cursor", async () => {
    const pushed = (await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'note.take', args: [1], options: { queue: 'noisy' } }, acme)).body.job;
    await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'note.take', args: [2], options: { queue: 'noisy' } }, { tenant: 'globex' });
    const enqueued = await waitFor('the job.enqueued event', async () => {
      const { events } = (await ojs(base, 'GET', '/ojs/v1/events?types=job.enqueued&queues=noisy', undefined, acme)).body;
      return events.length > 0 ? (events as Json[]) : undefined;
    });
    expect(enqueued.map((event) => [event.type, event.subject, event.data.job_type, event.data.tenant])).to.deep.equal([
      ['job.enqueued', pushed.id, 'note.take', 'acme'],
    ]);
    const fetched = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['noisy'], wait_ms: 5000 }, acme)).body.jobs as Json[];
    await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: fetched[0].id }, acme);
    const { cursor } = (await ojs(base, 'GET', '/ojs/v1/events?types=job.enqueued', undefined, acme)).body;
    const completed = await waitFor('the job.completed event after the cursor', async () => {
      const { events } = (await ojs(base, 'GET', `/ojs/v1/events?after=${cursor as string}&types=job.*`, undefined, acme)).body;
      return events.length > 0 ? (events as Json[]) : undefined;
    });
    expect(completed.map((event) => event.type)).to.deep.equal(['job.completed']);
    expect(completed[0].data).to.include({ job_type: 'note.take', queue: 'noisy', attempt: 1 });
    expect(completed[0].data.duration_ms).to.be.a('number');
    // The admin sees globex's push too.
    const every = (await ojs(base, 'GET', '/ojs/v1/events?types=job.enqueued&queues=noisy')).body.events as Json[];
    expect(every.map((event) => event.data.tenant).sort()).to.deep.equal(['acme', 'globex']);
  });

  it("answers a nack's retry with its delay and time, shows the delay on the fetched retry, and refuses a bad retry policy with 422", async () => {
    const id = (await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'flaky.run', args: [], options: { queue: 'flaky' } })).body.job
      .id as string;
    await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['flaky'], wait_ms: 5000 });
    const before = Date.now();
    const nacked = (await ojs(base, 'POST', '/ojs/v1/workers/nack', { job_id: id, error: { code: 'Flaky', message: 'once' } })).body;
    expect(nacked).to.include({ state: 'retryable', attempt: 1, retry_delay_ms: 1000 });
    expect(Date.parse(nacked.next_attempt_at as string) - before).to.be.within(900, 3000);
    const retry = await waitFor('the retry fetched', async () => {
      const jobs = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['flaky'], wait_ms: 1000 })).body.jobs as Json[];
      return jobs[0];
    });
    expect(retry).to.include({ id, attempt: 2, retry_delay_ms: 1000 });
    const second = (await ojs(base, 'POST', '/ojs/v1/workers/nack', { job_id: id, error: { code: 'Flaky', message: 'twice' } })).body;
    expect(second).to.include({ state: 'retryable', attempt: 2, retry_delay_ms: 2000 });

    const refused = await ojs(base, 'POST', '/ojs/v1/jobs', {
      type: 'flaky.run',
      args: [],
      options: { queue: 'flaky', retry: { backoff_coefficient: 0.5 } },
    });
    expect(refused.status).to.equal(422);
    expect(refused.body.error).to.include({ code: 'invalid_retry_policy', type: 'validation_error' });
    expect(refused.body.error.message).to.contain('backoff_coefficient');
  });
});
