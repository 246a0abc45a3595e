import { readFile } from 'node:fs/promises';
import amqplib from 'amqplib';
import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import type { RawConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { createLogger } from '../../src/logging/logger.js';
import { vhostOfAmqpUrl } from '../../src/security/broker-users.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { teardown } from '../../src/testing/test-config.js';
import { finished, runCli, spawnCli } from '../helpers/cli.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'admin-api' }, 'error');
const env = { AMQP_URL };
const TOKEN = 'test-admin-token-0123456789';
const FLAKY = [{ name: 'flaky', input: 'work', outputs: ['done'] }] as unknown as StageMetadata[];

interface Answer {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; message: string; retryable: boolean; details?: Record<string, unknown> } };
}

type Json = Record<string, unknown>;

async function consumers(queue: string): Promise<number> {
  const connection = await amqplib.connect(AMQP_URL);
  try {
    return (await (await connection.createChannel()).checkQueue(queue)).consumerCount;
  } finally {
    await connection.close();
  }
}

describe('the admin HTTP API, end to end', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let running: RunningGroup;
  let server: AdminServer;
  let api: ManagementClient;

  const call = async (method: string, path: string, options: { body?: unknown; token?: string | null } = {}): Promise<Answer> => {
    const token = options.token === undefined ? TOKEN : options.token;
    const response = await fetch(`http://127.0.0.1:${server.port}${path}`, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    });
    return { status: response.status, body: (await response.json()) as Answer['body'] };
  };
  const policy = async (name: string): Promise<Json | undefined> =>
    (await api.listPolicies(vhostOfAmqpUrl(AMQP_URL))).find((p) => p.name === name)?.definition;
  const runnerState = (tenant: string): string | undefined => running.group.runners.find((r) => r.tenant === tenant)?.state;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', 'globex'],
        queues: { work: {}, done: { max_size: 50 }, archive: {} },
        stages: { flaky: { module: FAILURE_STAGES_MODULE, concurrency: 2 } },
      },
      FLAKY,
      'admin-api',
    );
    running = await startGroup(
      project.config,
      ['acme', 'globex'].map((tenant) => ({ stage: 'flaky', tenant })),
      log,
    );
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env });
    api = new ManagementClient(project.config.broker.management);
  });

  after(async () => {
    await server?.close();
    await running?.stop();
    // The file as the API left it: queues created through it are torn down too.
    await teardown(await loadConfig(project.file, env), FLAKY);
    await project?.remove();
  });

  it('lists the queues and details one, as the broker has them', async () => {
    const { names } = project;
    // With an admin token set, reads need a token too (docs/security.md, "The admin port").
    expect((await call('GET', '/ojs/v1/queues', { token: null })).status).to.equal(401);
    const list = await call('GET', '/ojs/v1/queues');
    expect(list.status).to.equal(200);
    const queues = list.body.queues as Json[];
    expect(queues.map((q) => q.name)).to.deep.equal(['archive', 'done', 'work']);
    const work = queues.find((q) => q.name === 'work') as Json;
    expect(work).to.include({ scope: 'tenant', configured: true, state: 'active', physical_queues: 2 });
    expect(work.tenants).to.deep.equal(['acme', 'globex']);
    expect(queues.find((q) => q.name === 'done')?.config).to.deep.equal({ max_size: 50, overflow_policy: 'reject' });

    // Consumers are the plugin's samples: wait for them.
    const details = await waitFor(
      'the stage consuming, as sampled',
      async () => {
        const answer = await call('GET', '/ojs/v1/queues/work?tenant=acme');
        return (answer.body.stats as Json | undefined)?.consumers === 1 ? answer : undefined;
      },
      30_000,
    );
    expect(details.status).to.equal(200);
    expect(details.body).to.include({ name: 'work', tenant: 'acme', scope: 'tenant', state: 'active' });
    expect((details.body.queues as Json[]).map((q) => q.name)).to.deep.equal([names.queue('work', 'acme')]);
    expect(await consumers(names.queue('work', 'acme'))).to.equal(1);
    expect((details.body.config as Json).scope).to.equal('tenant');

    const all = await call('GET', '/ojs/v1/queues/work');
    expect(all.body.tenants).to.deep.equal(['acme', 'globex']);
    expect((all.body.queues as Json[]).map((q) => q.name)).to.deep.equal([names.queue('work', 'acme'), names.queue('work', 'globex')]);
  });

  it('pauses a queue (its stage stops consuming, GET shows it) and resumes it', async () => {
    const { names, raw } = project;
    const paused = await call('POST', '/ojs/v1/queues/work/pause?tenant=acme');
    expect(paused.status, JSON.stringify(paused.body)).to.equal(200);
    expect(paused.body.queues).to.deep.equal([{ name: names.queue('work', 'acme'), tenant: 'acme', state: 'paused' }]);
    await waitFor('the acme stage paused', () => runnerState('acme') === 'paused');
    expect(await consumers(names.queue('work', 'acme'))).to.equal(0);
    expect(runnerState('globex')).to.equal('running');

    for (let i = 0; i < 3; i++) await running.publisher.publish('work', { type: 'flaky', args: ['ok', `admin-${i}`], tenant: 'acme' });
    const shown = await waitFor(
      'the waiting jobs sampled',
      async () => {
        const answer = await call('GET', '/ojs/v1/queues/work?tenant=acme');
        // Counts and consumers are the plugin's samples, each caught up on its own.
        const stats = answer.body.stats as Json;
        return stats.available === 3 && stats.consumers === 0 ? answer : undefined;
      },
      30_000,
    );
    expect(shown.body).to.include({ state: 'paused' });
    expect(shown.body.stats).to.include({ depth: 3, available: 3, active: 0, consumers: 0 });
    expect(await raw.count(names.queue('work', 'acme'))).to.equal(3);
    expect((await call('GET', '/ojs/v1/queues/work')).body).to.include({ state: 'mixed' });

    const resumed = await call('POST', '/ojs/v1/queues/work/resume?tenant=acme');
    expect(resumed.status).to.equal(200);
    await waitFor("acme's jobs done once resumed", async () => (await raw.count(names.queue('done', 'acme'))) === 3);
    expect(runnerState('acme')).to.equal('running');
    expect((await call('GET', '/ojs/v1/queues/work?tenant=acme')).body).to.include({ state: 'active' });
    await raw.drain(names.queue('done', 'acme'));
  });

  it('PUT config changes max_size on the broker in place, writes the file, and plan agrees', async () => {
    const { names, file } = project;
    const put = await call('PUT', '/ojs/v1/queues/done/config', { body: { max_size: 7 } });
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    expect(put.body.applied).to.deep.equal({ policies_put: [`${names.prefix}.queue.done`], policies_deleted: [] });
    expect(put.body.restart_needed).to.deep.equal([]);
    expect((put.body.config as Json).max_size).to.equal(7);
    expect(await policy(`${names.prefix}.queue.done`)).to.deep.equal({ 'max-length': 7, overflow: 'reject-publish', 'queue-version': 2 });
    const written = JSON.parse(await readFile(file, 'utf8')) as RawConfig;
    expect(written.queues?.done).to.deep.equal({ max_size: 7 });
    expect((await call('GET', '/ojs/v1/queues/done/config')).body.config).to.include({ max_size: 7 });
    await waitFor('the broker enforcing 7', async () => {
      const answer = await call('GET', '/ojs/v1/queues/done?tenant=acme');
      return ((answer.body.queues as Json[])[0] as Json).max_size === 7;
    });

    // A tenant's own setting, and a field the stages read at start.
    const own = await call('PUT', '/ojs/v1/queues/done/config?tenant=globex', { body: { max_size: 3 } });
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    expect(await policy(`${names.prefix}.queue.done.globex`)).to.deep.equal({
      'max-length': 3,
      overflow: 'reject-publish',
      'queue-version': 2,
    });
    const retry = await call('PUT', '/ojs/v1/queues/done/config', { body: { max_size: 7, default_retry: { max_attempts: 5 } } });
    expect(retry.body.restart_needed).to.deep.equal(['default_retry']);
    // `events` (job.* events) is read when a stage starts; a tenant may turn its own off.
    const events = await call('PUT', '/ojs/v1/queues/done/config', {
      body: { max_size: 7, default_retry: { max_attempts: 5 }, events: true },
    });
    expect(events.status, JSON.stringify(events.body)).to.equal(200);
    expect(events.body.restart_needed).to.deep.equal(['events']);
    expect((events.body.config as Json).events).to.equal(true);
    const quiet = await call('PUT', '/ojs/v1/queues/done/config?tenant=globex', { body: { max_size: 3, events: false } });
    expect(quiet.status, JSON.stringify(quiet.body)).to.equal(200);
    expect((quiet.body.config as Json).events).to.equal(false);
    expect(quiet.body.restart_needed).to.deep.equal(['events']);
    const notBoolean = await call('PUT', '/ojs/v1/queues/done/config', { body: { events: 'yes' } });
    expect(notBoolean.status).to.equal(422);
    expect(notBoolean.body.error?.message).to.contain('events');

    const planned = await runCli(['plan', '--json', '--config', file], env);
    const plan = JSON.parse(planned.stdout) as { changes: Array<{ kind: string; name: string }> };
    expect(plan.changes.filter((c) => c.kind === 'policy')).to.deep.equal([]);
    expect(running.group.runners.map((r) => r.state)).to.deep.equal(['running', 'running']);
  });

  it('refuses configuration that cannot change at runtime or does not validate (422), and changes nothing', async () => {
    const { file } = project;
    const before = await readFile(file, 'utf8');
    const scope = await call('PUT', '/ojs/v1/queues/done/config', { body: { scope: 'shared', max_size: 1 } });
    expect(scope.status).to.equal(422);
    expect(scope.body.error).to.include({ code: 'INVALID_REQUEST', retryable: false });
    expect(scope.body.error?.details).to.deep.equal({ fields: ['scope'] });
    const invalid = await call('PUT', '/ojs/v1/queues/done/config', { body: { max_size: 'lots' } });
    expect(invalid.status).to.equal(422);
    expect(invalid.body.error?.code).to.equal('INVALID_CONFIG');
    // An OJS field stagecoach does not have (`concurrency` is a flow limit now: docs/flow-control.md).
    const unknown = await call('PUT', '/ojs/v1/queues/done/config', { body: { retention: 'P1D' } });
    expect(unknown.status).to.equal(422);
    expect(unknown.body.error?.message).to.contain('retention');
    expect(await readFile(file, 'utf8')).to.equal(before);
  });

  it('DELETE with reject on a non-empty queue is 409 and touches nothing; with discard it removes the queue and its entry', async () => {
    const { names, raw, file } = project;
    for (let i = 0; i < 2; i++) await running.publisher.publish('archive', { type: 'old', args: [i], tenant: 'acme' });
    const refused = await call('DELETE', '/ojs/v1/queues/archive', { body: { strategy: 'reject' } });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(409);
    expect(refused.body.error).to.include({ code: 'CONFLICT' });
    expect(refused.body.error?.details).to.include({ jobs_remaining: 2 });
    expect(await raw.count(names.queue('archive', 'acme'))).to.equal(2);
    expect((JSON.parse(await readFile(file, 'utf8')) as RawConfig).queues?.archive).to.deep.equal({});

    const used = await call('DELETE', '/ojs/v1/queues/work', { body: { strategy: 'discard' } });
    expect(used.status).to.equal(409);
    expect(used.body.error?.message).to.contain('stage "flaky"');

    const deleted = await call('DELETE', '/ojs/v1/queues/archive', { body: { strategy: 'discard' } });
    expect(deleted.status, JSON.stringify(deleted.body)).to.equal(200);
    expect(deleted.body).to.include({
      queue: 'archive',
      strategy: 'discard',
      jobs_affected: 2,
      state: 'deleted',
      configuration_removed: true,
    });
    expect(await raw.exists(names.queue('archive', 'acme'))).to.equal(false);
    expect(await raw.exists(names.queue('archive', 'globex'))).to.equal(false);
    expect((JSON.parse(await readFile(file, 'utf8')) as RawConfig).queues).to.not.have.property('archive');
    const gone = await call('GET', '/ojs/v1/queues/archive');
    expect(gone.status).to.equal(404);
    expect(gone.body.error?.code).to.equal('NOT_FOUND');
  });

  it('refuses every change without the token or with a wrong one (401), and changes nothing', async () => {
    const { names, file } = project;
    const fileBefore = await readFile(file, 'utf8');
    const policyBefore = await policy(`${names.prefix}.queue.done`);
    const changes: Array<[string, string, unknown]> = [
      ['POST', '/ojs/v1/queues/work/pause?tenant=globex', undefined],
      ['POST', '/ojs/v1/queues/work/drain?tenant=globex', undefined],
      ['POST', '/ojs/v1/queues/work/resume', undefined],
      ['PUT', '/ojs/v1/queues/done/config', { max_size: 1 }],
      ['PUT', '/ojs/v1/queues/_default/config', { max_size: 1 }],
      ['DELETE', '/ojs/v1/queues/done', { strategy: 'discard' }],
      ['POST', '/ojs/v1/queues', { name: 'sneaky' }],
    ];
    for (const [method, path, body] of changes) {
      for (const token of [null, 'wrong-token', `${TOKEN}x`, '']) {
        const answer = await call(method, path, { body, token });
        expect(answer.status, `${method} ${path} with ${String(token)}`).to.equal(401);
        expect(answer.body.error).to.include({ code: 'UNAUTHORIZED', retryable: false });
      }
    }
    expect(await readFile(file, 'utf8')).to.equal(fileBefore);
    expect(await policy(`${names.prefix}.queue.done`)).to.deep.equal(policyBefore);
    expect(await project.raw.exchangeExists(names.stateMarker('paused', 'work', 'globex'))).to.equal(false);
    expect(await project.raw.exchangeExists(names.stateMarker('draining', 'work', 'globex'))).to.equal(false);
    expect(runnerState('globex')).to.equal('running');

    const open = await startAdminServer({ configFile: file, port: 0, token: undefined, log, env });
    try {
      const response = await fetch(`http://127.0.0.1:${open.port}/ojs/v1/queues/work/pause`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(response.status).to.equal(401);
      expect(((await response.json()) as Answer['body']).error?.message).to.contain('STAGECOACH_ADMIN_TOKEN');
      expect((await fetch(`http://127.0.0.1:${open.port}/ojs/v1/queues`)).status, 'without an admin token reads stay open').to.equal(200);
    } finally {
      await open.close();
    }
  });

  it('answers bad requests with OJS errors', async () => {
    expect((await call('GET', '/ojs/v1/queues/nope')).status).to.equal(404);
    const tenant = await call('GET', '/ojs/v1/queues/work?tenant=Acme.pdf');
    expect(tenant.status).to.equal(400);
    expect(tenant.body.error?.code).to.equal('INVALID_REQUEST');
    expect((await call('GET', '/ojs/v1/elsewhere')).status).to.equal(404);
    expect((await call('PATCH', '/ojs/v1/queues/work')).status).to.equal(405);
    expect((await call('DELETE', '/ojs/v1/queues/done', { body: { strategy: 'shred' } })).status).to.equal(400);
    expect((await call('GET', '/ojs/v1/queues/_default/config')).body).to.have.nested.property('config.default_retry.max_attempts');
  });

  it('creates a queue (POST): configured, declared for every tenant, its settings put', async () => {
    const { names, raw, file } = project;
    const created = await call('POST', '/ojs/v1/queues', { body: { name: 'reports', config: { max_size: 9 } } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body).to.include({ name: 'reports', state: 'active' });
    expect(await raw.exists(names.queue('reports', 'acme'))).to.equal(true);
    expect(await raw.exists(names.queue('reports', 'globex'))).to.equal(true);
    expect(await policy(`${names.prefix}.queue.reports`)).to.deep.equal({
      'max-length': 9,
      overflow: 'reject-publish',
      'queue-version': 2,
    });
    expect((JSON.parse(await readFile(file, 'utf8')) as RawConfig).queues?.reports).to.deep.equal({ max_size: 9 });
    expect((await call('POST', '/ojs/v1/queues', { body: { name: 'reports' } })).status).to.equal(409);
  });

  it('creates a queue whose dead_letter_queue no one declared: the target is declared with it, for every tenant', async () => {
    const { names, raw } = project;
    const created = await call('POST', '/ojs/v1/queues', { body: { name: 'exports', config: { dead_letter_queue: 'exports-failed' } } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    for (const tenant of ['acme', 'globex']) {
      expect(await raw.exists(names.queue('exports', tenant)), tenant).to.equal(true);
      expect(await raw.exists(names.queue('exports-failed', tenant)), `its dead_letter_queue, ${tenant}`).to.equal(true);
    }
  });

  it('runs as `stagecoach admin` until SIGTERM, then exits 0; a bad --port exits 2', async () => {
    const child = spawnCli(['admin', '--port', '0', '--config', project.file], { ...env, STAGECOACH_ADMIN_TOKEN: TOKEN });
    try {
      const url = await waitFor(
        'the admin API listening',
        () => /on (http:\/\/127\.0\.0\.1:\d+)\//.exec(child.out)?.[1] ?? child.exitCode !== null,
      );
      expect(child.exitCode, child.err).to.equal(null);
      const response = await fetch(`${String(url)}/ojs/v1/queues`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(response.status).to.equal(200);
    } finally {
      child.kill('SIGTERM');
    }
    const exit = await finished(child, 15_000, 'admin');
    expect(exit.code, exit.stderr).to.equal(0);
    const bad = await runCli(['admin', '--port', 'high', '--config', project.file], env);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.contain('--port');
  });
});
