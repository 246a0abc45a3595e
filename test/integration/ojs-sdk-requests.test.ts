import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { OJS_MEDIA_TYPE } from '../../src/http-api/http-binding/ojs-media.js';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { createLogger } from '../../src/logging/logger.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import type { Json } from '../helpers/ojs-client.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';

const log = createLogger({ test: 'ojs-sdk-requests' }, 'error');
const TOKEN = 'test-ojs-sdk-requests-token-0123456789';
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** One answer with its headers, as an SDK's transport reads it. */
interface Answer {
  status: number;
  headers: Headers;
  body: Json;
}

/**
 * A request as the official SDKs send it (ojs-python-sdk's HTTPTransport, ojs-js-sdk's
 * HttpTransport): the binding's media type both ways, `OJS-Version`, a bearer token, and the
 * Python SDK's own `X-Request-ID` when asked.
 */
async function sdk(
  base: string,
  method: string,
  route: string,
  body?: unknown,
  as: { token?: string; tenant?: string; requestId?: string } = {},
): Promise<Answer> {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${as.token ?? TOKEN}`,
      accept: OJS_MEDIA_TYPE,
      'ojs-version': '1.0',
      ...(as.tenant === undefined ? {} : { 'x-ojs-tenant': as.tenant }),
      ...(as.requestId === undefined ? {} : { 'X-Request-ID': as.requestId }),
      ...(body === undefined ? {} : { 'content-type': OJS_MEDIA_TYPE }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Json };
}

describe('the official OJS SDKs: their requests, as their READMEs make them', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let server: AdminServer;
  let base: string;

  const push = async (body: Json, as: { tenant?: string; token?: string } = {}): Promise<Answer> =>
    sdk(base, 'POST', '/ojs/v1/jobs', { specversion: '1.0', args: [], ...body }, as);
  /** Every job a fetch of `queue` hands out within `waitMs`, acknowledged. */
  const drain = async (queue: string, waitMs: number, as: { tenant?: string } = {}): Promise<Json[]> => {
    const jobs: Json[] = [];
    for (;;) {
      const fetched = (await sdk(base, 'POST', '/ojs/v1/workers/fetch', { queues: [queue], count: 10, wait_ms: waitMs }, as)).body
        .jobs as Json[];
      if (fetched.length === 0) return jobs;
      for (const job of fetched) expect((await sdk(base, 'POST', '/ojs/v1/workers/ack', { job_id: job.id }, as)).status).to.equal(200);
      jobs.push(...fetched);
    }
  };

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', 'globex'],
        queues: {
          _default: { scope: 'shared' },
          email: {},
          small: { max_size: 1, overflow_policy: 'reject' },
          picky: { allowed_job_types: ['report.*'] },
          reports: { scope: 'tenant' },
          relay: {},
          'py.dotted': { default_retry: { max_attempts: 1 } },
          'reports.v2': { scope: 'tenant', max_size: 5 },
        },
        stages: {},
      },
      [],
      'ojs-sdk-requests',
    );
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
    base = `http://127.0.0.1:${server.port}`;
  });

  after(async () => {
    await server?.close();
    await project?.remove();
    if (project !== undefined) await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
  });

  describe("the binding's answers (an SDK acts on them)", () => {
    it("every answer carries X-Request-Id (the client's own when it sent one), every error its request_id; a 201 its Location", async () => {
      const created = await push({ type: 'email.send', args: ['a@example.com'], options: { queue: 'email' } }, {});
      expect(created.status).to.equal(201);
      expect(created.headers.get('x-request-id')).to.match(/^req_[0-9a-f-]{36}$/);
      expect(created.headers.get('location')).to.equal(`/ojs/v1/jobs/${created.body.job.id as string}`);
      const info = await sdk(base, 'GET', created.headers.get('location') as string, undefined, { requestId: 'req_client-1234' });
      expect(info.status).to.equal(200);
      expect(info.headers.get('x-request-id')).to.equal('req_client-1234');
      expect(info.body.job.id).to.equal(created.body.job.id);
      const missing = await sdk(base, 'GET', '/ojs/v1/jobs/019414d4-0000-7000-8000-000000000000', undefined, {
        requestId: 'req_client-5678',
      });
      expect(missing.status).to.equal(404);
      expect(missing.body.error).to.include({ code: 'not_found', request_id: 'req_client-5678' });
      const admin = await sdk(base, 'GET', '/ojs/v1/queues/Nope!/config');
      expect(admin.body.error.request_id).to.equal(admin.headers.get('x-request-id'));
    });

    it('an unknown endpoint answers in the binding media type with a lowercase code; one above this server 422 unsupported', async () => {
      const unknown = await sdk(base, 'GET', '/ojs/v1/nothing-here');
      expect(unknown.status).to.equal(404);
      expect(unknown.headers.get('content-type')).to.equal(OJS_MEDIA_TYPE);
      expect(unknown.body.error).to.include({ code: 'not_found', retryable: false });
      const schemas = await sdk(base, 'GET', '/ojs/v1/schemas');
      expect(schemas.status).to.equal(422);
      expect(schemas.headers.get('content-type')).to.equal(OJS_MEDIA_TYPE);
      expect(schemas.body.error).to.include({ code: 'unsupported', retryable: false });
    });

    it('a push into a full queue is 429 QUEUE_FULL, retryable, with Retry-After; a job type the queue refuses is 422', async () => {
      expect((await push({ type: 'fill.one', options: { queue: 'small' } })).status).to.equal(201);
      const full = await push({ type: 'fill.two', options: { queue: 'small' } });
      expect(full.status, JSON.stringify(full.body)).to.equal(429);
      expect(full.headers.get('retry-after')).to.equal('1');
      expect(full.body.error).to.include({ code: 'QUEUE_FULL', retryable: true });
      const refused = await push({ type: 'email.send', options: { queue: 'picky' } });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(422);
      expect(refused.body.error).to.include({ code: 'job_type_not_allowed', retryable: false });
      expect((await push({ type: 'report.generate', options: { queue: 'picky' } })).status).to.equal(201);
    });
  });

  describe('the job as the SDKs write and read it', () => {
    it('specversion "1.0" on the pushed and the fetched job; a fetched job has timeout in seconds and timeout_ms', async () => {
      const pushed = await push({ type: 'email.send', args: ['b@example.com'], options: { queue: 'relay', timeout_ms: 30_000 } });
      expect(pushed.status).to.equal(201);
      expect(pushed.body.job.specversion).to.equal('1.0');
      const [fetched] = await waitFor('the job fetched', async () => {
        const jobs = (await sdk(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['relay'], count: 1, wait_ms: 2000 })).body.jobs as Json[];
        return jobs.length > 0 ? jobs : undefined;
      });
      expect(fetched).to.include({ id: pushed.body.job.id, specversion: '1.0', timeout: 30, timeout_ms: 30_000 });
      expect((await sdk(base, 'POST', '/ojs/v1/workers/ack', { job_id: fetched.id })).status).to.equal(200);
    });

    it('options.tags are kept: in the push answer, INFO, the fetched job, and GET /ojs/v1/jobs?tag=', async () => {
      const tagged = await push({ type: 'email.send', options: { queue: 'email', tags: ['onboarding', 'vip'] } });
      const plain = await push({ type: 'email.send', options: { queue: 'email' } });
      expect(tagged.body.job.tags).to.deep.equal(['onboarding', 'vip']);
      expect(plain.body.job).to.not.have.property('tags');
      expect((await sdk(base, 'GET', `/ojs/v1/jobs/${tagged.body.job.id as string}`)).body.job.tags).to.deep.equal(['onboarding', 'vip']);
      // The job store keeps them: the list filters by tag.
      const listed = await waitFor('the tagged job listed by its tag', async () => {
        const jobs = (await sdk(base, 'GET', '/ojs/v1/jobs?tag=vip&queue=email')).body.jobs as Json[];
        return jobs.length > 0 ? jobs : undefined;
      });
      expect(listed.map((job) => job.id)).to.deep.equal([tagged.body.job.id]);
      expect(listed[0].tags).to.deep.equal(['onboarding', 'vip']);
      const fetched = await drain('email', 1000);
      expect(fetched.find((job) => job.id === tagged.body.job.id)?.tags).to.deep.equal(['onboarding', 'vip']);
      expect(fetched.map((job) => job.id)).to.include(plain.body.job.id);
    });

    it('unique.key as the SDKs send it: a second job with the same key is a duplicate', async () => {
      const unique = { key: ['report_id'], period: 'PT1H', on_conflict: 'reject' };
      const first = await push({ type: 'report.generate', args: [{ report_id: 42 }], options: { queue: 'picky', unique } });
      expect(first.status, JSON.stringify(first.body)).to.equal(201);
      const second = await push({ type: 'report.generate', args: [{ report_id: 42, locale: 'da' }], options: { queue: 'picky', unique } });
      expect(second.status, JSON.stringify(second.body)).to.equal(409);
      expect(second.body.error.code).to.equal('duplicate');
      const other = await push({ type: 'report.generate', args: [{ report_id: 43 }], options: { queue: 'picky', unique } });
      expect(other.status, JSON.stringify(other.body)).to.equal(201);
    });
  });

  describe('queue names as ojs-core writes them', () => {
    it('a dotted queue takes pushes, fetches, dead letters and admin calls; on the broker its dots are "~"', async () => {
      const pushed = await push({ type: 'py.job', args: [1], options: { queue: 'py.dotted' } });
      expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
      expect(pushed.body.job.queue).to.equal('py.dotted');
      expect(await project.raw.exists(`${project.config.prefix}.queue.py~dotted`)).to.equal(true);
      const [fetched] = await waitFor("the dotted queue's job fetched", async () => {
        const jobs = (await sdk(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['py.dotted'], count: 1, wait_ms: 2000 })).body
          .jobs as Json[];
        return jobs.length > 0 ? jobs : undefined;
      });
      expect(fetched).to.include({ id: pushed.body.job.id, queue: 'py.dotted' });
      // One attempt: the nack dead-letters it, and the binding lists it under its queue's name.
      const nacked = await sdk(base, 'POST', '/ojs/v1/workers/nack', {
        job_id: fetched.id,
        error: { code: 'handler_error', message: 'no' },
      });
      expect(nacked.status).to.equal(200);
      const dead = await waitFor('the dead letter listed', async () => {
        const jobs = (await sdk(base, 'GET', '/ojs/v1/dead-letter?queue=py.dotted')).body.jobs as Json[] | undefined;
        return jobs !== undefined && jobs.length > 0 ? jobs : undefined;
      });
      expect(dead.map((job) => [job.id, job.queue])).to.deep.equal([[pushed.body.job.id, 'py.dotted']]);
      const config = await sdk(base, 'GET', '/ojs/v1/queues/py.dotted/config');
      expect(config.status, JSON.stringify(config.body)).to.equal(200);
    });

    it("a tenant-scoped dotted queue: one broker queue per tenant, its settings' policy named by the queue's word", async () => {
      const pushed = await push({ type: 'report.generate', options: { queue: 'reports.v2' } }, { tenant: 'acme' });
      expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
      expect(await project.raw.exists(`${project.config.prefix}.queue.reports~v2.acme`)).to.equal(true);
      const policies = await new ManagementClient(project.config.broker.management).listPolicies('/');
      expect(policies.map((policy) => policy.name)).to.include(`${project.config.prefix}.queue.reports~v2`);
      expect((await drain('reports.v2', 1000, { tenant: 'acme' })).map((job) => job.id)).to.deep.equal([pushed.body.job.id]);
    });
  });

  describe('meta.tenant_id (ojs-multi-tenancy 5.1, 5.3)', () => {
    it('is read as the tenant, written from X-OJS-Tenant, and a conflict with it is refused', async () => {
      const fromMeta = await push({ type: 'report.generate', meta: { tenant_id: 'acme' }, options: { queue: 'reports' } });
      expect(fromMeta.status, JSON.stringify(fromMeta.body)).to.equal(201);
      expect(fromMeta.body.job.tenant).to.equal('acme');
      const fromHeader = await push({ type: 'report.generate', options: { queue: 'reports' } }, { tenant: 'globex' });
      expect(fromHeader.status).to.equal(201);
      expect(fromHeader.body.job.meta.tenant_id).to.equal('globex');
      const conflict = await push(
        { type: 'report.generate', meta: { tenant_id: 'acme' }, options: { queue: 'reports' } },
        { tenant: 'globex' },
      );
      expect(conflict.status).to.equal(400);
      expect(conflict.body.error.code).to.equal('invalid_request');
      // A tenant token too: its own tenant only.
      const token = tenantToken(TOKEN, project.config.prefix, 'acme');
      const confined = await push({ type: 'report.generate', meta: { tenant_id: 'globex' }, options: { queue: 'reports' } }, { token });
      expect(confined.status).to.equal(400);
      // The job as a worker fetches it carries the tenant in meta.
      const fetched = await drain('reports', 1000, { tenant: 'globex' });
      expect(fetched.map((job) => [job.id, job.meta.tenant_id])).to.deep.equal([[fromHeader.body.job.id, 'globex']]);
      expect((await drain('reports', 1000, { tenant: 'acme' })).map((job) => job.id)).to.deep.equal([fromMeta.body.job.id]);
    });
  });

  describe('pending jobs and ACTIVATE (binding 7.8, 9.5)', () => {
    const fetchNow = async (queue: string, waitMs: number): Promise<Json[]> =>
      (await sdk(base, 'POST', '/ojs/v1/workers/fetch', { queues: [queue], count: 5, wait_ms: waitMs })).body.jobs as Json[];

    it('a job pushed pending waits, unfetched, until activated; then it runs; a second ACTIVATE is 409', async () => {
      const pushed = await push({ type: 'approval.send', args: [7], options: { queue: 'relay', pending: true } });
      expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
      expect(pushed.body.job.state).to.equal('pending');
      expect(await fetchNow('relay', 1500)).to.deep.equal([]);
      expect((await sdk(base, 'GET', `/ojs/v1/jobs/${pushed.body.job.id as string}`)).body.job.state).to.equal('pending');
      const other = tenantToken(TOKEN, project.config.prefix, 'acme');
      expect(
        (await sdk(base, 'POST', `/ojs/v1/jobs/${pushed.body.job.id as string}/activate`, undefined, { token: other })).status,
      ).to.equal(404);
      const activated = await sdk(base, 'POST', `/ojs/v1/jobs/${pushed.body.job.id as string}/activate`);
      expect(activated.status, JSON.stringify(activated.body)).to.equal(200);
      expect(activated.body.job).to.include({ id: pushed.body.job.id, state: 'available', previous_state: 'pending' });
      expect(activated.body.job.activated_at).to.be.a('string');
      const again = await sdk(base, 'POST', `/ojs/v1/jobs/${pushed.body.job.id as string}/activate`);
      expect(again.status).to.equal(409);
      expect(again.body.error.details.current_state).to.not.equal('pending');
      const ran = await drain('relay', 2000);
      expect(ran.map((job) => job.id)).to.deep.equal([pushed.body.job.id]);
      expect((await sdk(base, 'POST', '/ojs/v1/jobs/019414d4-0000-7000-8000-000000000000/activate')).status).to.equal(404);
    });

    it('a pending job outlives the server that held it: another server activates it', async () => {
      const pushed = await push({ type: 'approval.send', args: [8], options: { queue: 'relay', pending: true } });
      expect(pushed.status).to.equal(201);
      await server.close();
      server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
      base = `http://127.0.0.1:${server.port}`;
      const id = pushed.body.job.id as string;
      // The new server knows it from the tracking stream alone.
      await waitFor(
        'the job known pending by the new server',
        async () => (await sdk(base, 'GET', `/ojs/v1/jobs/${id}`)).body.job?.state === 'pending',
      );
      expect(await fetchNow('relay', 1000)).to.deep.equal([]);
      const activated = await sdk(base, 'POST', `/ojs/v1/jobs/${id}/activate`);
      expect(activated.status, JSON.stringify(activated.body)).to.equal(200);
      expect((await drain('relay', 2000)).map((job) => job.id)).to.deep.equal([id]);
    });

    it('a cancelled pending job is cancelled and leaves the parked queue: it never runs', async () => {
      const pushed = await push({ type: 'approval.send', args: [9], options: { queue: 'relay', pending: true } });
      const id = pushed.body.job.id as string;
      await waitFor('the pending job in the store', async () => (await sdk(base, 'GET', `/ojs/v1/jobs/${id}/status`)).status === 200);
      const cancelled = await sdk(base, 'DELETE', `/ojs/v1/jobs/${id}`);
      expect(cancelled.status, JSON.stringify(cancelled.body)).to.equal(200);
      expect(cancelled.body.job.state).to.equal('cancelled');
      expect(await project.raw.count(project.names.parked)).to.equal(0);
      expect((await sdk(base, 'POST', `/ojs/v1/jobs/${id}/activate`)).status).to.equal(409);
    });
  });

  describe('a foreign worker inside a pipeline', () => {
    it('a run pushed again after a crash (same parent, same key) makes no second job', async () => {
      const parent = await push({ type: 'doc.convert', args: ['a.pdf'], options: { queue: 'relay' } });
      const output = {
        type: 'doc.text',
        args: ['a.txt'],
        meta: { parent_id: parent.body.job.id, idempotency_key: 'text' },
        options: { queue: 'email' },
      };
      const first = await push(output);
      expect(first.status, JSON.stringify(first.body)).to.equal(201);
      expect(first.body.job.id).to.match(UUID_V7);
      // The worker crashed before its ack; its job runs again and pushes its output again.
      const again = await push(output);
      expect(again.status, JSON.stringify(again.body)).to.equal(200);
      expect(again.body).to.include({ deduplicated: true });
      expect(again.body.job.id).to.equal(first.body.job.id);
      const fetched = await drain('email', 1500);
      expect(fetched.filter((job) => job.type === 'doc.text').map((job) => job.id)).to.deep.equal([first.body.job.id]);
      // Another key of the same parent is another job.
      const other = await push({ ...output, meta: { parent_id: parent.body.job.id, idempotency_key: 'thumbnail' } });
      expect(other.status).to.equal(201);
      expect(other.body.job.id).to.not.equal(first.body.job.id);
      await drain('email', 1000);
      await drain('relay', 1000);
    });
  });

  // Last: a second server in this process takes over the memory store's unique keys, and gives them up when it closes.
  describe('a server on a prefix where nothing is declared yet', () => {
    it('GET /ojs/v1/events answers before anything has declared the events exchange', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-events-first-'));
      const prefix = `test-${randomBytes(4).toString('hex')}`;
      const file = path.join(dir, 'stagecoach.json');
      await writeFile(file, JSON.stringify({ prefix, durable: false, queues: { _default: { scope: 'shared' } }, stages: {} }));
      const fresh = await startAdminServer({ configFile: file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
      try {
        const events = await sdk(`http://127.0.0.1:${fresh.port}`, 'GET', '/ojs/v1/events');
        expect(events.status, JSON.stringify(events.body)).to.equal(200);
        expect(events.body.events).to.deep.equal([]);
      } finally {
        await fresh.close();
        await deletePrefix(AMQP_URL, project.config.broker.management, prefix);
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
});
