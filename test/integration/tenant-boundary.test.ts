import net from 'node:net';
import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { tenantToken, viewerToken } from '../../src/http-api/tenant-tokens.js';
import { createLogger } from '../../src/logging/logger.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import type { Json } from '../helpers/ojs-client.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { openConnection } from '../../src/broker/amqp-connection.js';
import { ReopeningPublisher } from '../../src/broker/reopening-publisher.js';
import { Publisher } from '../../src/publisher/publisher.js';

async function expectRejection(promise: Promise<unknown>, message: RegExp): Promise<void> {
  const outcome = await promise.then(
    () => undefined,
    (err: Error) => err,
  );
  expect(outcome, 'a rejection').to.be.instanceOf(Error);
  expect((outcome as Error).message).to.match(message);
}

const log = createLogger({ test: 'tenant-boundary' }, 'error');
const TOKEN = 'test-tenant-boundary-token-0123456789';
const OJS = 'application/openjobspec+json';

interface CallOptions {
  /** Bearer token; `null` sends none. @defaultValue the admin token */
  token?: string | null;
  accept?: string;
  tenant?: string;
  body?: unknown;
  /** The body's content type; `null` sends none. @defaultValue the OJS media type */
  contentType?: string | null;
}

/**
 * The boundary between tenants on `stagecoach admin`'s port (docs/security.md, "The admin port"):
 * what each token may read and do, route by route, and what one caller can make the server hold.
 */
describe('the tenant boundary on the admin port', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let server: AdminServer;
  let base: string;
  let acme: string;
  let globex: string;
  let viewer: string;

  const call = async (
    method: string,
    route: string,
    options: CallOptions = {},
  ): Promise<{ status: number; body: Json; headers: Headers }> => {
    const token = options.token === undefined ? TOKEN : options.token;
    const contentType = options.contentType === undefined ? OJS : options.contentType;
    const response = await fetch(`${base}${route}`, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        accept: options.accept ?? OJS,
        ...(options.tenant === undefined ? {} : { 'x-ojs-tenant': options.tenant }),
        ...(options.body === undefined || contentType === null ? {} : { 'content-type': contentType }),
      },
      ...(options.body === undefined ? {} : { body: typeof options.body === 'string' ? options.body : JSON.stringify(options.body) }),
    });
    const text = await response.text();
    let body: Json;
    try {
      body = text === '' ? {} : (JSON.parse(text) as Json);
    } catch {
      body = { text };
    }
    return { status: response.status, body, headers: response.headers };
  };
  const push = async (tenant: string, args: unknown[], queue = 'conversions'): Promise<Json> => {
    const answer = await call('POST', '/ojs/v1/jobs', { tenant, body: { type: 'doc.convert', args, options: { queue } } });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.job as Json;
  };

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', 'globex'],
        queues: { _default: { scope: 'tenant' }, conversions: {}, work: { scope: 'shared' } },
        stages: {},
      },
      [],
      'tenant-boundary',
    );
    server = await startAdminServer({
      configFile: project.file,
      port: 0,
      token: TOKEN,
      log,
      env: { AMQP_URL },
      stages: [],
      payloadSweep: false,
      limits: { queuesPerTenant: 4, requestTimeoutMs: 1500, headersTimeoutMs: 1000 },
    });
    base = `http://127.0.0.1:${server.port}`;
    acme = tenantToken(TOKEN, project.config.prefix, 'acme');
    globex = tenantToken(TOKEN, project.config.prefix, 'globex');
    viewer = viewerToken(TOKEN, project.config.prefix, 'ops');
  });

  after(async () => {
    await server?.close();
    await project?.remove();
    if (project !== undefined) await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
  });

  describe('who sees what', () => {
    it("a tenant's token registers, reads and changes its own tenant's schedules only (docs/schedules.md)", async () => {
      const nightly = {
        name: 'nightly',
        expression: '0 2 * * *',
        job_template: { type: 'scan.start', args: [], options: { queue: 'conversions' } },
      };
      const mine = await call('POST', '/ojs/v1/cron', { token: acme, body: nightly });
      expect(mine.status, JSON.stringify(mine.body)).to.equal(201);
      expect(mine.body.cron).to.include({ name: 'nightly', tenant: 'acme' });
      // The same name is another tenant's own: neither learns of the other's.
      expect((await call('POST', '/ojs/v1/cron', { token: globex, body: nightly })).status).to.equal(201);
      const listed = await call('GET', '/ojs/v1/cron', { token: acme });
      expect((listed.body.crons as Json[]).map((cron) => `${cron.tenant as string}/${cron.name as string}`)).to.deep.equal([
        'acme/nightly',
      ]);
      expect((await call('GET', '/ojs/v1/cron/nightly', { token: acme })).body.cron).to.include({ tenant: 'acme' });
      // Another tenant's is not to be named, read or changed.
      expect((await call('GET', '/ojs/v1/cron', { token: acme, tenant: 'globex' })).status).to.equal(403);
      expect((await call('DELETE', '/ojs/v1/cron/nightly', { token: acme, tenant: 'globex' })).status).to.equal(403);
      expect((await call('POST', '/ojs/v1/cron/other/trigger', { token: acme })).status).to.equal(404);
      // A tenant's schedule fires for its tenant alone.
      const everyone = await call('POST', '/ojs/v1/cron', { token: acme, body: { ...nightly, name: 'all', tenants: '*' } });
      expect(everyone.status).to.equal(400);
      expect(everyone.body.error.message).to.match(/own tenant/);
      // The admin sees both; a viewer reads and changes nothing; no token reads nothing.
      const all = await call('GET', '/ojs/v1/cron', { accept: 'application/json' });
      expect((all.body.crons as Json[]).map((cron) => cron.tenant)).to.have.members(['acme', 'globex']);
      expect((await call('PATCH', '/ojs/v1/cron/nightly', { token: viewer, tenant: 'acme', body: { enabled: false } })).status).to.equal(
        403,
      );
      expect((await call('GET', '/ojs/v1/cron', { token: null })).status).to.equal(401);
      expect((await call('PATCH', '/ojs/v1/cron/nightly', { token: acme, body: { enabled: false } })).body.cron).to.include({
        enabled: false,
        next_run_at: null,
      });
      expect((await call('DELETE', '/ojs/v1/cron/nightly', { token: acme })).status).to.equal(200);
      expect((await call('GET', '/ojs/v1/cron/nightly', { token: globex })).body.cron).to.include({ tenant: 'globex', enabled: true });
    });

    it("a tenant's token never reads or cancels another tenant's job, whatever Accept and X-OJS-Tenant say", async () => {
      const theirs = await push('globex', ['g']);
      const ours = await push('acme', ['a']);
      for (const accept of ['application/json', '*/*', OJS]) {
        expect((await call('GET', `/ojs/v1/jobs/${theirs.id as string}`, { token: acme, accept })).status, `GET, ${accept}`).to.equal(404);
        expect((await call('DELETE', `/ojs/v1/jobs/${theirs.id as string}`, { token: acme, accept })).status, `DELETE, ${accept}`).to.equal(
          404,
        );
        expect((await call('GET', `/ojs/v1/jobs/${theirs.id as string}/status`, { token: acme, accept })).status).to.equal(404);
        // Naming the other tenant is refused outright, on every route.
        expect((await call('GET', `/ojs/v1/jobs/${theirs.id as string}`, { token: acme, accept, tenant: 'globex' })).status).to.equal(403);
      }
      expect((await call('GET', '/ojs/v1/jobs?tenant=globex', { token: acme, accept: 'application/json' })).status).to.equal(403);
      const listed = (await waitFor('acme to list its own job', async () => {
        const answer = await call('GET', '/ojs/v1/jobs', { token: acme, accept: 'application/json' });
        return answer.status === 200 && (answer.body.jobs as Json[]).length > 0 ? answer.body : undefined;
      })) as Json;
      expect((listed.jobs as Json[]).every((job) => job.tenant === 'acme')).to.equal(true);
      expect((listed.jobs as Json[]).map((job) => job.id)).to.include(ours.id);
      // globex's job was neither read nor touched: it still waits.
      const info = await call('GET', `/ojs/v1/jobs/${theirs.id as string}`, { token: globex });
      expect(info.body.job).to.include({ id: theirs.id, state: 'available' });
      // Its own jobs it reads and cancels.
      expect((await call('GET', `/ojs/v1/jobs/${ours.id as string}`, { token: acme, accept: 'application/json' })).body.job.id).to.equal(
        ours.id,
      );
    });

    it("without a token nothing that carries a tenant's data is served; health and the manifest stay open", async () => {
      const job = await push('globex', ['secret']);
      const closed = [
        `/ojs/v1/jobs/${job.id as string}`,
        `/ojs/v1/jobs/${job.id as string}/status`,
        `/ojs/v1/jobs/${job.id as string}/progress`,
        '/ojs/v1/jobs',
        '/ojs/v1/jobs?tenant=globex',
        '/ojs/v1/dead-letter',
        '/ojs/v1/events',
        '/ojs/v1/batches',
        '/ojs/v1/admin/workers',
        '/ojs/v1/queues',
        '/ojs/v1/queues/conversions/config',
        '/ojs/v1/queues/conversions/stats',
        '/ojs/v1/admin/tenants/globex/stats',
        '/ojs/v1/queues/conversions/dead-letters?tenant=globex',
        '/ojs/v1/dashboard/matrix',
        '/ojs/v1/unroutable',
        '/ojs/v1/rate-limits',
      ];
      for (const route of closed) {
        for (const accept of [OJS, 'application/json']) {
          const answer = await call('GET', route, { token: null, accept });
          expect(answer.status, `${route} (${accept}): ${JSON.stringify(answer.body)}`).to.equal(401);
        }
        // A token that is not one of this server's is no one's.
        expect((await call('GET', route, { token: 'not-a-token' })).status, route).to.equal(401);
      }
      expect((await call('GET', '/ojs/v1/health', { token: null })).status).to.equal(200);
      expect((await call('GET', '/ojs/manifest', { token: null })).status).to.equal(200);
    });

    it('a viewer token reads every tenant and changes nothing', async () => {
      const job = await push('globex', ['seen']);
      expect((await call('GET', `/ojs/v1/jobs/${job.id as string}`, { token: viewer })).body.job.id).to.equal(job.id);
      expect((await call('GET', '/ojs/v1/queues', { token: viewer, accept: 'application/json' })).status).to.equal(200);
      expect((await call('GET', '/ojs/v1/admin/workers', { token: viewer })).status).to.equal(200);
      expect((await call('DELETE', `/ojs/v1/jobs/${job.id as string}`, { token: viewer })).status).to.equal(403);
      const pushed = await call('POST', '/ojs/v1/jobs', { token: viewer, tenant: 'globex', body: { type: 'doc.convert', args: [] } });
      expect(pushed.status).to.equal(403);
      expect((await call('POST', '/ojs/v1/queues/conversions/pause?tenant=globex', { token: viewer })).status).to.equal(403);
      expect((await call('GET', `/ojs/v1/jobs/${job.id as string}`, { token: globex })).body.job.state).to.equal('available');
    });

    it("GET /ojs/v1/jobs/{id} answers the binding's { job } whatever Accept says; the status view has its own path", async () => {
      const job = await push('acme', ['shape']);
      for (const accept of [OJS, 'application/json', '*/*']) {
        const answer = await call('GET', `/ojs/v1/jobs/${job.id as string}`, { accept });
        expect(answer.status).to.equal(200);
        expect(answer.body.job, accept).to.include({ id: job.id, type: 'doc.convert', queue: 'conversions' });
        expect(answer.headers.get('content-type')).to.equal(OJS);
      }
      const status = await waitFor('the job status view', async () => {
        const answer = await call('GET', `/ojs/v1/jobs/${job.id as string}/status`, { accept: 'application/json' });
        return answer.status === 200 ? answer.body : undefined;
      });
      expect(status).to.include({ id: job.id, tenant: 'acme' });
      expect(status).to.not.have.property('job');
    });
  });

  describe('no tenant can stop the others', () => {
    it('a type the broker cannot carry is refused with 400 naming it, and every tenant goes on pushing', async () => {
      const refused = await call('POST', '/ojs/v1/jobs', {
        token: acme,
        body: { type: 'a'.repeat(300), args: [], options: { queue: 'conversions' } },
      });
      expect(refused.status).to.equal(400);
      expect(refused.body.error.message).to.match(/"type"/);
      await push('globex', ['after']);
      await push('acme', ['after']);
    });

    it("the library's Publisher refuses a job or header the broker cannot carry, and publishes the next job", async () => {
      const publisher = await Publisher.connect(project.config, { log });
      try {
        await expectRejection(publisher.publish('conversions', { type: 'b'.repeat(300), args: [], tenant: 'acme' }), /"type"/);
        // Caught by the publish channel itself (nothing above checks header names): the message fails alone.
        await expectRejection(
          publisher.publish('conversions', { type: 'doc.convert', args: [], tenant: 'acme', headers: { ['h'.repeat(300)]: 'x' } }),
          /header name/,
        );
        expect(await publisher.publish('conversions', { type: 'doc.convert', args: ['next'], tenant: 'acme' })).to.be.a('string');
      } finally {
        await publisher.close();
      }
    });

    it('a publish channel the broker closed is opened anew for the next publish, on the same connection', async () => {
      const connection = await openConnection(project.config, log, 'tenant-boundary-test');
      const channel = await ReopeningPublisher.open(connection);
      try {
        await expectRejection(channel.publish(`${project.config.prefix}.no-such-exchange`, 'x', Buffer.from('{}'), {}), /./);
        await channel.publish(`${project.config.prefix}.direct`, 'nowhere', Buffer.from('{}'), {});
      } finally {
        await channel.close();
        await connection.close();
      }
    });

    it('fetch takes OJS queue names only, declares nothing for a queue that does not exist, and bounds what one tenant holds', async () => {
      for (const bad of ['../x', 'ABC', 'a b', '']) {
        const answer = await call('POST', '/ojs/v1/workers/fetch', { token: acme, body: { queues: [bad] } });
        expect(answer.status, bad).to.equal(400);
      }
      const many = Array.from({ length: 40 }, (_, i) => `made-up-${i}`);
      expect((await call('POST', '/ojs/v1/workers/fetch', { token: acme, body: { queues: many } })).status).to.equal(400);
      const api = new ManagementClient(project.config.broker.management);
      const before = (await api.listQueues('/', `^${project.config.prefix}\\.`)).length;
      for (let i = 0; i < 10; i += 1) {
        const answer = await call('POST', '/ojs/v1/workers/fetch', { token: acme, body: { queues: [`nothing-here-${i}`] } });
        expect(answer.status).to.equal(200);
        expect(answer.body.jobs).to.deep.equal([]);
      }
      const after = (await api.listQueues('/', `^${project.config.prefix}\\.`)).length;
      expect(after).to.equal(before);
      // Pushes create queues (OJS implicit creation), up to the tenant's bound.
      let refused: { status: number; body: Json } | undefined;
      for (let i = 0; i < 8 && refused === undefined; i += 1) {
        const answer = await call('POST', '/ojs/v1/jobs', {
          token: acme,
          body: { type: 'x.y', args: [], options: { queue: `implicit-${i}` } },
        });
        if (answer.status !== 201) refused = answer;
      }
      expect(refused?.status).to.equal(429);
      expect(refused?.body.error.code).to.equal('tenant_limit_exceeded');
      // The other tenant is not held back by acme's excess.
      const theirs = await call('POST', '/ojs/v1/jobs', {
        token: globex,
        body: { type: 'x.y', args: [], options: { queue: 'implicit-0' } },
      });
      expect(theirs.status).to.equal(201);
      const fetched = await call('POST', '/ojs/v1/workers/fetch', { token: globex, body: { queues: ['implicit-0'], wait_ms: 3000 } });
      expect((fetched.body.jobs as Json[]).map((job) => job.id)).to.deep.equal([theirs.body.job.id]);
    });

    it('bodies: too deep is 400, a body that is not JSON by its content type is 415', async () => {
      // Written by hand: JSON.stringify itself runs out of stack on it.
      const deep = `{"type":"x.y","options":{"queue":"conversions"},"args":${'['.repeat(10_000)}${']'.repeat(10_000)}}`;
      const tooDeep = await call('POST', '/ojs/v1/jobs', { token: acme, body: deep });
      expect(tooDeep.status).to.equal(400);
      const job = { type: 'x.y', args: [], options: { queue: 'conversions' } };
      expect((await call('POST', '/ojs/v1/jobs', { token: acme, body: job, contentType: 'text/plain' })).status).to.equal(415);
      expect((await call('POST', '/ojs/v1/jobs', { token: acme, body: job, contentType: null })).status).to.equal(415);
      expect(
        (await call('POST', '/ojs/v1/jobs', { token: acme, body: job, contentType: 'application/json; charset=utf-8' })).status,
      ).to.equal(201);
    });

    it('a client that trickles its request cannot hold its socket past the request timeout', async () => {
      const socket = net.connect(server.port, '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      let closed = false;
      socket.on('close', () => (closed = true));
      socket.on('error', () => undefined);
      socket.write(
        `POST /ojs/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${acme}\r\nContent-Type: ${OJS}\r\nContent-Length: 1000\r\n\r\n{`,
      );
      const timer = setInterval(() => socket.write(' '), 200);
      try {
        await waitFor('the server to close a trickling request', () => closed, 8000);
      } finally {
        clearInterval(timer);
        socket.destroy();
      }
    });
  });
});
