import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { createLogger } from '../../src/logging/logger.js';
import { vhostOfAmqpUrl } from '../../src/security/broker-users.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';

const log = createLogger({ test: 'admin-config-write' }, 'error');
const TOKEN = 'test-admin-token-config-write';
const MANAGEMENT = new URL(process.env.STAGECOACH_MANAGEMENT_URL ?? 'http://guest:guest@localhost:15672/');

/**
 * The management API as the admin server sees it: every call passed on to the broker's, except
 * that while `failing` is set a change of a policy is answered 500, as a broker refusing it would.
 */
async function managementProxy(): Promise<{ server: Server; url: string; failing: { on: boolean } }> {
  const failing = { on: false };
  const server = createServer((req, res) => {
    if (failing.on && req.url?.startsWith('/api/policies/') && (req.method === 'PUT' || req.method === 'DELETE')) {
      req.resume();
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'internal_error', reason: 'injected by the test' }));
      return;
    }
    const upstream = request(
      { host: MANAGEMENT.hostname, port: MANAGEMENT.port || 15672, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const user = `${decodeURIComponent(MANAGEMENT.username || 'guest')}:${decodeURIComponent(MANAGEMENT.password || 'guest')}`;
  return { server, url: `http://${user}@127.0.0.1:${(server.address() as AddressInfo).port}/`, failing };
}

interface Answer {
  status: number;
  body: { error: { code: string; message: string; retryable: boolean; details: Record<string, unknown> } };
}

/** A PUT of `/ojs/v1/queues/done/config` with a body sent as written (JSON.stringify cannot write 1e400). */
async function putText(server: AdminServer, text: string): Promise<Answer> {
  const response = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/queues/done/config`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: text,
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

describe('PUT .../config: the file changes only with the broker, and never after an error', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let proxy: Awaited<ReturnType<typeof managementProxy>>;
  let server: AdminServer;
  let api: ManagementClient;

  const policy = async (name: string): Promise<Record<string, unknown> | undefined> =>
    (await api.listPolicies(vhostOfAmqpUrl(AMQP_URL))).find((p) => p.name === name)?.definition;

  before(async () => {
    project = await writeConfigFile(
      { tenants: ['acme'], queues: { done: { max_size: 50 } } },
      [{ name: 'sink', input: 'done', outputs: [] }],
      'admin-config-write',
    );
    proxy = await managementProxy();
    api = new ManagementClient(project.config.broker.management);
    server = await startAdminServer({
      configFile: project.file,
      port: 0,
      token: TOKEN,
      log,
      env: { AMQP_URL, STAGECOACH_MANAGEMENT_URL: proxy.url },
    });
  });

  after(async () => {
    await server?.close();
    await new Promise((resolve) => proxy?.server.close(resolve));
    await project?.remove();
  });

  it('refuses a number JSON cannot hold (1e400 is Infinity) with 422 naming the key, and leaves file and broker as they were', async () => {
    const before = await readFile(project.file, 'utf8');
    const answer = await putText(server, '{"max_size": 1e400}');
    expect(answer.status).to.equal(422);
    expect(answer.body.error.code).to.equal('INVALID_CONFIG');
    expect(answer.body.error.details.key).to.equal('queues.done.max_size');
    expect(answer.body.error.message).to.contain('finite');
    expect(await readFile(project.file, 'utf8')).to.equal(before);
    expect(await policy(`${project.config.prefix}.queue.done`)).to.include({ 'max-length': 50 });
  });

  it('leaves the file as it was when the broker refuses the change (500 MANAGEMENT_FAILED)', async () => {
    const before = await readFile(project.file, 'utf8');
    proxy.failing.on = true;
    let answer: Answer;
    try {
      answer = await putText(server, '{"max_size": 7}');
    } finally {
      proxy.failing.on = false;
    }
    expect(answer.status).to.equal(500);
    expect(answer.body.error).to.include({ code: 'MANAGEMENT_FAILED', retryable: true });
    expect(await readFile(project.file, 'utf8')).to.equal(before);
    expect(await policy(`${project.config.prefix}.queue.done`)).to.include({ 'max-length': 50 });
  });

  it('with the broker answering, puts the policy and then writes the file', async () => {
    const answer = await putText(server, '{"max_size": 7}');
    expect(answer.status).to.equal(200);
    expect(await policy(`${project.config.prefix}.queue.done`)).to.include({ 'max-length': 7 });
    expect((JSON.parse(await readFile(project.file, 'utf8')) as { queues: Record<string, unknown> }).queues.done).to.deep.equal({
      max_size: 7,
    });
  });

  it('a PUT replaces the entry and says which fields it removed, never silently', async () => {
    const first = await putText(server, '{"max_size": 9, "allowed_job_types": ["done.note"], "events": true}');
    expect(first.status, JSON.stringify(first.body)).to.equal(200);
    expect((first.body as { removed?: unknown }).removed).to.deep.equal([]);
    const second = await putText(server, '{"max_size": 9, "retention": {"completed": "P1D"}}');
    expect(second.status, JSON.stringify(second.body)).to.equal(200);
    expect((second.body as { removed?: unknown }).removed).to.deep.equal(['allowed_job_types', 'events']);
    expect((JSON.parse(await readFile(project.file, 'utf8')) as { queues: Record<string, unknown> }).queues.done).to.deep.equal({
      max_size: 9,
      retention: { completed: 'P1D' },
    });
  });
});
