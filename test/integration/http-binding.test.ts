import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { createLogger } from '../../src/logging/logger.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { finished, REPO_ROOT, runCli, spawnCli } from '../helpers/cli.js';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';

const log = createLogger({ test: 'http-binding' }, 'error');
const TOKEN = 'test-http-binding-token-0123456789';
const WORKER = path.join(REPO_ROOT, 'examples/python/ojs_worker.py');

const ojs = ojsClient(TOKEN);

/** Runs the standard-library Python worker of examples/python to its end. */
function python(args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn('python3', [WORKER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }) as ReturnType<typeof spawn> & {
    out: string;
    err: string;
  };
  child.out = '';
  child.err = '';
  child.stdout?.on('data', (chunk: Buffer) => (child.out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (child.err += chunk.toString()));
  return finished(child, timeoutMs, 'python worker');
}

describe('the OJS HTTP binding, with workers over HTTP', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let server: AdminServer;
  let base: string;

  const push = async (queue: string, type: string, args: unknown[]): Promise<string> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type, args, options: { queue } });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.job.id as string;
  };
  const info = async (id: string): Promise<Json> => (await ojs(base, 'GET', `/ojs/v1/jobs/${id}`)).body.job as Json;

  before(async () => {
    const retry = { max_attempts: 3, initial_interval: 'PT1S', backoff_coefficient: 1, max_interval: 'PT1S' };
    project = await writeConfigFile(
      {
        tenants: ['acme', 'globex'],
        queues: {
          _default: { scope: 'shared', default_retry: retry },
          work: {},
          done: {},
          relay: {},
          lease: {},
          conversions: { scope: 'tenant' },
        },
        stages: {},
      },
      [],
      'http-binding',
    );
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
    base = `http://127.0.0.1:${server.port}`;
  });

  after(async () => {
    await server?.close();
    await project?.remove();
    if (project !== undefined) await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
  });

  it('a Python worker fetches, acks with an emit (confirmed downstream) and nacks into a retry on the ladder', async () => {
    const ids = [
      await push('work', 'doc.convert', ['a.txt']),
      await push('work', 'doc.convert', ['fail-once']),
      await push('work', 'doc.convert', ['b.txt']),
    ];
    for (const id of ids) expect((await info(id)).state).to.equal('available');
    // Four settlements: three first attempts (one nacked) and the retry of the nacked one.
    const run = await python(
      ['--url', base, '--token', TOKEN, '--queue', 'work', '--emit-to', 'done', '--handler', 'echo', '--batch', '3', '--max-jobs', '4'],
      60_000,
    );
    expect(run.code, run.stderr).to.equal(0);
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Json);
    expect(lines.map((line) => line.state).sort()).to.deep.equal(['completed', 'completed', 'completed', 'retryable']);
    const failed = await info(ids[1]);
    expect(failed.state).to.equal('completed');
    expect(failed.attempt).to.equal(2);
    expect(failed.errors.map((error: Json) => error.type)).to.deep.equal(['ValueError']);
    for (const id of [ids[0], ids[2]]) expect(await info(id)).to.include({ state: 'completed', attempt: 1 });
    // What the worker emitted with its acks: three jobs downstream, children of their inputs.
    const emitted = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['done'], count: 3, wait_ms: 5000 })).body.jobs as Json[];
    const more =
      emitted.length < 3
        ? ((await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['done'], count: 3, wait_ms: 5000 })).body.jobs as Json[])
        : [];
    const all = [...emitted, ...more];
    expect(all.map((job) => job.type)).to.deep.equal(['doc.convert.done', 'doc.convert.done', 'doc.convert.done']);
    expect(all.map((job) => job.meta.parent_id).sort()).to.deep.equal([...ids].sort());
    for (const job of all) expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: job.id })).body.state).to.equal('completed');
  });

  it('a server SIGKILLed while its worker holds claimed jobs loses none: the broker redelivers them', async () => {
    const child = spawnCli(['admin', '--config', project.file, '--port', '0'], { AMQP_URL, STAGECOACH_ADMIN_TOKEN: TOKEN });
    const url = await waitFor('the second server to listen', () => /OJS HTTP binding on (http:\/\/[^/]+)\//.exec(child.out)?.[1], 20_000);
    const ids = [];
    for (const n of [1, 2]) {
      const answer = await ojs(url, 'POST', '/ojs/v1/jobs', { type: 'relay.job', args: [n], options: { queue: 'relay' } });
      ids.push(answer.body.job.id as string);
    }
    // Claims add up over fetches: a fetch answers with what is there once one job is, so under
    // load the first may hold one job and the next the other (each claim is kept: they are the
    // worker's until the server dies).
    const held: Json[] = [];
    const claimed = await waitFor('both jobs claimed from the doomed server', async () => {
      held.push(...((await ojs(url, 'POST', '/ojs/v1/workers/fetch', { queues: ['relay'], count: 2, wait_ms: 2000 })).body.jobs as Json[]));
      return held.length >= 2 ? held : undefined;
    });
    expect(claimed.map((job) => job.id).sort()).to.deep.equal([...ids].sort());
    child.kill('SIGKILL');
    await finished(child, 10_000, 'admin (killed)');
    // This server serves the queue now: each job comes back (through the suspect queue, run alone) and completes.
    const done = new Set<string>();
    await waitFor(
      'both jobs redelivered and acknowledged',
      async () => {
        for (const job of (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['relay'], count: 2, wait_ms: 1000 })).body
          .jobs as Json[]) {
          expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: job.id })).status).to.equal(200);
          done.add(job.id as string);
        }
        return done.size === 2;
      },
      60_000,
    );
    expect([...done].sort()).to.deep.equal([...ids].sort());
    for (const id of ids) expect((await info(id)).state).to.equal('completed');
  });

  it('a claim whose visibility timeout runs out goes back to available, same attempt, no failure counted', async () => {
    const id = await push('lease', 'lease.job', []);
    const first = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['lease'], visibility_timeout_ms: 1000, wait_ms: 5000 })).body
      .jobs as Json[];
    expect(first.map((job) => job.id)).to.deep.equal([id]);
    expect(first[0].attempt).to.equal(1);
    const again = await waitFor('the job handed back after its visibility timeout', async () => {
      const jobs = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['lease'], wait_ms: 1000 })).body.jobs as Json[];
      return jobs.length > 0 ? jobs[0] : undefined;
    });
    expect(again).to.include({ id, attempt: 1 });
    const acked = (await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: id })).body;
    expect(acked).to.include({ state: 'completed', attempt: 1 });
    // An ack after the claim ended is refused: the job is no longer this worker's.
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: id })).status).to.equal(409);
  });

  it('a nack with requeue hands the job back at once, same attempt, whatever its error says', async () => {
    const id = await push('lease', 'lease.requeue', []);
    const [claimed] = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['lease'], worker_id: 'w-requeue', wait_ms: 5000 })).body
      .jobs as Json[];
    expect(claimed).to.include({ id, attempt: 1 });
    const nacked = await ojs(base, 'POST', '/ojs/v1/workers/nack', {
      job_id: id,
      worker_id: 'w-requeue',
      error: { code: 'cancelled', message: 'shutting down', retryable: false },
      requeue: true,
    });
    expect(nacked.body, JSON.stringify(nacked.body)).to.include({ state: 'available' });
    const [again] = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['lease'], worker_id: 'w-other', wait_ms: 5000 })).body
      .jobs as Json[];
    expect(again).to.include({ id, attempt: 1 });
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: id })).body).to.include({ state: 'completed', attempt: 1 });
  });

  it('an operator quiets a worker: its heartbeat answers quiet, it gets no more jobs, and it still acks what it holds; terminate goes further, never back', async () => {
    const held = await push('lease', 'lease.quiet', []);
    const [claimed] = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['lease'], worker_id: 'w-quiet', wait_ms: 5000 })).body
      .jobs as Json[];
    expect(claimed).to.include({ id: held });
    const beat = async (): Promise<Json> =>
      (await ojs(base, 'POST', '/ojs/v1/workers/heartbeat', { worker_id: 'w-quiet', active_job_ids: [held] })).body;
    expect(await beat()).to.include({ state: 'running', directive: '' });
    expect((await ojs(base, 'POST', '/ojs/v1/admin/workers/w-unseen/quiet')).status).to.equal(404);
    expect((await ojs(base, 'POST', '/ojs/v1/admin/workers/w-quiet/quiet')).body.worker).to.include({ id: 'w-quiet', state: 'quiet' });
    expect(await beat()).to.deep.include({ state: 'quiet', directive: 'quiet', jobs_extended: [held] });
    const waiting = await push('lease', 'lease.quiet', []);
    expect(
      (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['lease'], worker_id: 'w-quiet', wait_ms: 1000 })).body.jobs,
    ).to.deep.equal([]);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: held, worker_id: 'w-quiet' })).body.state).to.equal('completed');
    const listed = (await ojs(base, 'GET', '/ojs/v1/admin/workers')).body as unknown as Json[];
    expect(listed.find((worker) => worker.id === 'w-quiet')).to.include({ state: 'quiet', active_jobs: 1 });
    await ojs(base, 'POST', '/ojs/v1/admin/workers/w-quiet/terminate');
    await ojs(base, 'POST', '/ojs/v1/admin/workers/w-quiet/quiet');
    expect(await beat()).to.include({ state: 'terminate', directive: 'terminate' });
    // Another worker takes what the quiet one was not given.
    const [taken] = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['lease'], worker_id: 'w-next', wait_ms: 5000 })).body
      .jobs as Json[];
    expect(taken).to.include({ id: waiting });
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: waiting })).body.state).to.equal('completed');
  });

  it("a tenant's token confines it to its tenant: another's jobs are not found, shared queues and admin endpoints refused", async () => {
    const { stdout } = await runCli(['credentials', 'acme', '--role', 'http', '--config', project.file], {
      AMQP_URL,
      STAGECOACH_ADMIN_TOKEN: TOKEN,
    });
    const acme = stdout.trim();
    expect(acme).to.equal(tenantToken(TOKEN, project.config.prefix, 'acme'));
    const asAcme = { token: acme };
    const theirs = (
      await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'doc.convert', args: ['g'], options: { queue: 'conversions' } }, { tenant: 'globex' })
    ).body.job;
    expect(theirs.tenant).to.equal('globex');
    const ours = (await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'doc.convert', args: ['a'], options: { queue: 'conversions' } }, asAcme))
      .body.job;
    expect(ours.tenant).to.equal('acme');
    expect((await ojs(base, 'GET', `/ojs/v1/jobs/${theirs.id as string}`, undefined, asAcme)).status).to.equal(404);
    expect((await ojs(base, 'DELETE', `/ojs/v1/jobs/${theirs.id as string}`, undefined, asAcme)).status).to.equal(404);
    expect(
      (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['conversions'] }, { ...asAcme, tenant: 'globex' })).status,
    ).to.equal(403);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['work'] }, asAcme)).status).to.equal(403);
    expect((await ojs(base, 'GET', '/ojs/v1/queues', undefined, asAcme)).status).to.equal(403);
    expect((await ojs(base, 'GET', '/ojs/v1/admin/workers', undefined, asAcme)).status).to.equal(403);
    const fetched = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['conversions'], count: 5, wait_ms: 3000 }, asAcme)).body
      .jobs as Json[];
    expect(fetched.map((job) => job.id)).to.deep.equal([ours.id]);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: ours.id }, asAcme)).body.state).to.equal('completed');
    // globex's job is still there for globex's workers (the admin acting for globex here).
    const globex = (await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['conversions'], wait_ms: 3000 }, { tenant: 'globex' })).body
      .jobs as Json[];
    expect(globex.map((job) => job.id)).to.deep.equal([theirs.id]);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: theirs.id }, asAcme)).status).to.equal(404);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: theirs.id }, { tenant: 'globex' })).body.state).to.equal('completed');
  });
});
