import { expect } from 'chai';
import { readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { startAdminServer } from '../../src/http-api/admin-server.js';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { createLogger } from '../../src/logging/logger.js';
import { OJS_MEDIA_TYPE } from '../../src/http-api/http-binding/ojs-media.js';
import { verifyWebhookSignature } from '../../src/webhooks/webhook-signature.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-http-binding-webhooks-token-0123456789';
const ojs = ojsClient(TOKEN);
const SUBSCRIPTIONS = '/ojs/v1/webhooks/subscriptions';

/** One request a receiver got: its path, headers and raw body, and the status it answered. */
interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
}

/** A local HTTP endpoint that records every request; `answers` says the status of each, in turn (200 after). */
async function startReceiver(answers: Record<string, number[]>): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '/';
      const status = answers[path]?.shift() ?? 200;
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('the HTTP binding: webhook subscriptions and their deliveries', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;
  let acme: { token: string };
  let globex: { token: string };

  before(async () => {
    binding = await startBindingServer(
      {
        tenants: ['acme', 'globex'],
        queues: { _default: { scope: 'shared' }, scans: { scope: 'tenant', events: true } },
        stages: {},
        // The receivers listen on 127.0.0.1: an internal address, delivered to only when allowed.
        webhooks: { allow_private_addresses: true },
      },
      'http-binding-webhooks',
      TOKEN,
      { webhooks: { retryDelaysMs: [50, 50, 50], timeoutMs: 5000, delivererRetryMs: 200 } },
    );
    ({ project, base } = binding);
    acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    globex = { token: tenantToken(TOKEN, project.config.prefix, 'globex') };
  });

  after(async () => {
    await binding?.close();
  });

  it("confines a tenant's token to its own subscriptions, shows the secret once and refuses a bad URL naming the field", async () => {
    const created = await ojs(base, 'POST', SUBSCRIPTIONS, { url: 'https://hooks.acme.example/ojs', events: ['job.completed'] }, acme);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const subscription = created.body.subscription as Json;
    expect(subscription).to.include({ url: 'https://hooks.acme.example/ojs', active: true, tenant: 'acme' });
    expect(subscription.secret).to.match(/^whsec_[0-9a-f]{64}$/);
    const path = `${SUBSCRIPTIONS}/${subscription.id as string}`;

    const read = await ojs(base, 'GET', path, undefined, acme);
    expect(read.status).to.equal(200);
    expect(read.body.subscription).to.include({ id: subscription.id, url: 'https://hooks.acme.example/ojs' });
    expect(read.body.subscription).not.to.have.property('secret');
    const changed = await ojs(base, 'PATCH', path, { events: ['job.completed', 'job.failed'], active: false }, acme);
    expect(changed.status, JSON.stringify(changed.body)).to.equal(200);
    expect(changed.body.subscription).to.deep.include({ events: ['job.completed', 'job.failed'], active: false });

    // Another tenant: as if it did not exist, and not in its list.
    expect((await ojs(base, 'GET', path, undefined, globex)).status).to.equal(404);
    expect((await ojs(base, 'PATCH', path, { active: true }, globex)).status).to.equal(404);
    expect((await ojs(base, 'DELETE', path, undefined, globex)).status).to.equal(404);
    expect((await ojs(base, 'GET', SUBSCRIPTIONS, undefined, globex)).body.subscriptions).to.deep.equal([]);
    expect((await ojs(base, 'GET', SUBSCRIPTIONS, undefined, { ...acme, tenant: 'globex' })).status).to.equal(403);
    // The admin sees it, and only acme's when acting for acme.
    const mine = (await ojs(base, 'GET', SUBSCRIPTIONS, undefined, acme)).body.subscriptions as Json[];
    expect(mine.map((known) => known.id)).to.deep.equal([subscription.id]);
    expect(((await ojs(base, 'GET', SUBSCRIPTIONS)).body.subscriptions as Json[]).map((known) => known.id)).to.include(subscription.id);
    expect((await ojs(base, 'GET', SUBSCRIPTIONS, undefined, { tenant: 'globex' })).body.subscriptions).to.deep.equal([]);

    // Without a token: 401, reads included (they carry a tenant's data).
    for (const [method, route] of [
      ['GET', SUBSCRIPTIONS],
      ['GET', path],
      ['POST', SUBSCRIPTIONS],
    ] as const) {
      const response = await fetch(`${base}${route}`, {
        method,
        headers: { accept: OJS_MEDIA_TYPE, 'content-type': OJS_MEDIA_TYPE },
        ...(method === 'POST' ? { body: JSON.stringify({ url: 'https://x.example', events: ['*'] }) } : {}),
      });
      expect(response.status, `${method} ${route}`).to.equal(401);
    }

    const ftp = await ojs(base, 'POST', SUBSCRIPTIONS, { url: 'ftp://hooks.acme.example/ojs', events: ['job.completed'] }, acme);
    expect(ftp.status).to.equal(400);
    expect(ftp.body.error.message).to.contain('"url"');
    const noEvents = await ojs(base, 'POST', SUBSCRIPTIONS, { url: 'https://hooks.acme.example/ojs', events: [] }, acme);
    expect(noEvents.status).to.equal(400);
    expect(noEvents.body.error.message).to.contain('"events"');
    expect((await ojs(base, 'PATCH', path, { url: 'file:///etc/passwd' }, acme)).status).to.equal(400);

    // Kept in the schedules stream: another admin server of the prefix (or this one restarted) knows it.
    // That one runs without the allowance of internal addresses: it refuses them, naming "url".
    const strict = join(project.dir, 'strict.json');
    const settings = JSON.parse(await readFile(project.file, 'utf8')) as Json;
    delete settings.webhooks;
    await writeFile(strict, JSON.stringify(settings));
    const other = await startAdminServer({
      configFile: strict,
      port: 0,
      token: TOKEN,
      log: createLogger({ test: 'http-binding-webhooks' }, 'error'),
      env: { AMQP_URL },
      stages: [],
      scheduler: false,
    });
    try {
      const seen = await ojs(`http://127.0.0.1:${other.port}`, 'GET', path, undefined, acme);
      expect(seen.status).to.equal(200);
      expect(seen.body.subscription).to.deep.include({ events: ['job.completed', 'job.failed'], active: false });
      for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.7:8080/h', 'http://[::1]/h', 'http://localhost/h']) {
        const internal = await ojs(`http://127.0.0.1:${other.port}`, 'POST', SUBSCRIPTIONS, { url, events: ['*'] }, acme);
        expect(internal.status, url).to.equal(400);
        expect(internal.body.error.message, url).to.contain('"url"');
      }
      const moved = await ojs(`http://127.0.0.1:${other.port}`, 'PATCH', path, { url: 'http://[fd00::1]/h' }, acme);
      expect(moved.status).to.equal(400);
      expect(moved.body.error.message).to.contain('"url"');
    } finally {
      await other.close();
    }

    // The spec's test delivery and secret rotation are not served: 422, not a 404 that reads as a typo.
    expect((await ojs(base, 'POST', `${path}/rotate-secret`, undefined, acme)).status).to.equal(422);
    expect((await ojs(base, 'DELETE', path, undefined, acme)).status).to.equal(200);
    expect((await ojs(base, 'GET', path, undefined, acme)).status).to.equal(404);
  });

  it("delivers each tenant's events, signed, to its own subscriptions only, and retries after a 500", async () => {
    const receiver = await startReceiver({ '/acme': [500] });
    try {
      const subscribe = async (as: { token: string }, path: string): Promise<Json> => {
        const answer = await ojs(base, 'POST', SUBSCRIPTIONS, { url: `${receiver.url}${path}`, events: ['job.*'] }, as);
        expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
        return answer.body.subscription as Json;
      };
      const acmeHook = await subscribe(acme, '/acme');
      const globexHook = await subscribe(globex, '/globex');

      const push = async (as: { token: string }, file: string): Promise<string> => {
        const pushed = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'scan.start', args: [file], options: { queue: 'scans' } }, as);
        expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
        return pushed.body.job.id as string;
      };
      const acmeJob = await push(acme, 'acme.pdf');
      const globexJob = await push(globex, 'globex.pdf');
      // The scan completes (an HTTP worker of acme's acknowledges it): acme's system hears that too.
      const fetched = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['scans'], wait_ms: 5000, worker_id: 'w1' }, acme);
      expect((fetched.body.jobs as Json[]).map((job) => job.id)).to.deep.equal([acmeJob]);
      expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: acmeJob, result: { clean: true } }, acme)).status).to.equal(200);

      const delivered = (path: string, type: string): Received | undefined =>
        receiver.received.find(
          (request) => request.path === path && request.status === 200 && request.headers['x-ojs-event-type'] === type,
        );
      const enqueued = await waitFor("acme's job.enqueued delivered", () => delivered('/acme', 'job.enqueued'), 30_000);
      await waitFor("acme's job.completed delivered", () => delivered('/acme', 'job.completed'), 30_000);
      const theirs = await waitFor("globex's job.enqueued delivered", () => delivered('/globex', 'job.enqueued'), 30_000);

      // Signed with the subscription's secret over `<timestamp>.<body>`.
      const timestamp = enqueued.headers['x-ojs-timestamp'] as string;
      const signature = enqueued.headers['x-ojs-signature'] as string;
      expect(verifyWebhookSignature(acmeHook.secret as string, timestamp, enqueued.body, signature)).to.equal(true);
      expect(verifyWebhookSignature(globexHook.secret as string, timestamp, enqueued.body, signature)).to.equal(false);
      expect(enqueued.headers).to.include({ 'content-type': 'application/json', 'x-ojs-subscription-id': acmeHook.id });
      const event = JSON.parse(enqueued.body) as Json;
      expect(event).to.include({ type: 'job.enqueued', subject: acmeJob });
      expect(event.data).to.include({ tenant: 'acme', queue: 'scans' });
      expect(JSON.parse(theirs.body)).to.include({ subject: globexJob });

      // The first attempt got a 500: the same delivery came again and was taken.
      const first = receiver.received.find((request) => request.path === '/acme') as Received;
      expect(first.status).to.equal(500);
      const again = receiver.received.filter((request) => request.headers['x-ojs-delivery-id'] === first.headers['x-ojs-delivery-id']);
      expect(again.map((request) => request.status)).to.deep.equal([500, 200]);

      // Neither tenant heard the other's events. A subscription's queue sends its deliveries in the
      // order they came, and globex's push came before acme's completion: had acme's subscription
      // taken globex's event, it would have been sent before the completion just waited for.
      const tenants = (path: string): string[] =>
        receiver.received
          .filter((request) => request.path === path)
          .map((request) => (JSON.parse(request.body) as Json).data.tenant as string);
      expect(new Set(tenants('/acme'))).to.deep.equal(new Set(['acme']));
      expect(new Set(tenants('/globex'))).to.deep.equal(new Set(['globex']));
      expect(receiver.received.some((request) => request.body.includes(globexJob) && request.path === '/acme')).to.equal(false);
    } finally {
      await receiver.close();
    }
  });

  // Last: it stops the first server.
  it('delivers each event once however many admin servers run, and another server takes over when the deliverer stops', async () => {
    const receiver = await startReceiver({});
    const second = await startAdminServer({
      configFile: project.file,
      port: 0,
      token: TOKEN,
      log: createLogger({ test: 'http-binding-webhooks' }, 'error'),
      env: { AMQP_URL },
      stages: [],
      scheduler: false,
      webhooks: { retryDelaysMs: [50], timeoutMs: 5000, delivererRetryMs: 200 },
    });
    const secondBase = `http://127.0.0.1:${second.port}`;
    try {
      const created = await ojs(base, 'POST', SUBSCRIPTIONS, { url: `${receiver.url}/once`, events: ['job.enqueued'] }, acme);
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      // Both servers know the subscription (and read the events: GET /ojs/v1/events listens).
      for (const at of [base, secondBase]) {
        expect((await ojs(at, 'GET', `${SUBSCRIPTIONS}/${created.body.subscription.id as string}`, undefined, acme)).status).to.equal(200);
        expect((await ojs(at, 'GET', '/ojs/v1/events', undefined, acme)).status).to.equal(200);
      }
      const push = async (at: string, file: string): Promise<string> => {
        const pushed = await ojs(at, 'POST', '/ojs/v1/jobs', { type: 'scan.start', args: [file], options: { queue: 'scans' } }, acme);
        expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
        return pushed.body.job.id as string;
      };
      const deliveredJobs = (): string[] =>
        receiver.received
          .filter((request) => request.status === 200)
          .map((request) => (JSON.parse(request.body) as Json).subject as string);
      for (const file of ['one.pdf', 'two.pdf', 'three.pdf']) {
        const job = await push(file === 'two.pdf' ? secondBase : base, file);
        await waitFor(`${file}'s job.enqueued delivered`, () => deliveredJobs().includes(job), 30_000);
      }

      // The first server (the deliverer, elected first) stops: the second delivers what comes next.
      await binding?.server.close();
      const after: string[] = [];
      await waitFor(
        'a job pushed after the first server stopped delivered by the second',
        async () => {
          after.push(await push(secondBase, `after-${after.length}.pdf`));
          return deliveredJobs().some((job) => after.includes(job));
        },
        30_000,
        500,
      );
      // One delivery per event: no server delivered what another did.
      const ids = receiver.received
        .filter((request) => request.status === 200)
        .map((request) => (JSON.parse(request.body) as Json).id as string);
      expect(ids.length, JSON.stringify(deliveredJobs())).to.equal(new Set(ids).size);
    } finally {
      await second.close();
      await receiver.close();
    }
  });
});
