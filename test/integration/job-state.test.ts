import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { startAdminServer } from '../../src/http-api/admin-server.js';
import { Tracker } from '../../src/tracker/tracker.js';
import { cancelJob } from '../../src/directives/cancel-job.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { foldJob, type JobRecord, type JobRow } from '../../src/job-state/job-lifecycle.js';
import { openConnection } from '../../src/broker/amqp-connection.js';
import { ensureTrackingStream, TrackingReader } from '../../src/tracking-stream/tracking-reader.js';
import { stamp, type DirectiveRecord } from '../../src/tracking-stream/tracking-report.js';
import { publishRecord } from '../../src/tracking-stream/tracking-stream.js';
import { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import { JobCancels } from '../../src/runner/handling/job-cancels.js';
import { uuidv7 } from '../../src/job/uuid-v7.js';
import { PostgresJobStore } from '../../src/job-state/postgres-job-store.js';
import { retentionOf } from '../../src/job-state/create-job-store.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { holdGate, ran } from '../fixtures/job-state-stages.js';
import { finished, REPO_ROOT, runCli, spawnCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/job-state-stages.js');
const PG = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const STAGES = [
  { name: 'worker', input: 'work', outputs: [] },
  { name: 'late', input: 'later', outputs: [] },
  { name: 'crasher', input: 'crashy', outputs: [] },
] as unknown as StageMetadata[];
const env = { AMQP_URL };
const log = createLogger({ test: 'job-state' }, 'error');

describe('job state: every tracked job in the PostgreSQL job store (docs/job-state.md)', function () {
  this.timeout(180_000);
  let project: ConfigFile;
  let config: CompiledConfig;
  let tracker: Tracker;
  const groups: RunningGroup[] = [];
  const stores: PostgresJobStore[] = [];
  /** Ids the later cases look up again: the completed job, the discarded one. */
  const seen: { completed?: string; discarded?: string } = {};

  const row = async (id: string): Promise<JobRow | undefined> => {
    await tracker.sync();
    return (tracker.jobs as PostgresJobStore).get(id);
  };
  const cli = (...args: string[]) => runCli([...args, '--config', project.file], env);
  const statusJson = async (id: string): Promise<Record<string, unknown>> => {
    const result = await cli('job', 'status', id, '--json');
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout) as Record<string, unknown>;
  };
  const group = async (stage: string): Promise<RunningGroup> => {
    const running = await startGroup(config, [{ stage }], log);
    groups.push(running);
    return running;
  };

  before(async () => {
    project = await writeConfigFile(
      {
        queues: {
          _default: { scope: 'shared', default_retry: { max_attempts: 2, initial_interval: 'PT1S', jitter: false } },
          later: { scope: 'shared', retention: { completed: 'PT1M', cancelled: 'PT1M' } },
        },
        tracking: { store: { kind: 'postgres', url: PG } },
        stages: { worker: { module: MODULE }, late: { module: MODULE }, crasher: { module: MODULE } },
      },
      STAGES,
      'job-state',
    );
    config = project.config;
    tracker = await Tracker.start(config, { log });
  });

  after(async () => {
    holdGate.releaseAll();
    await tracker?.close();
    for (const running of groups.reverse()) await running.stop();
    for (const store of stores) await store.drop().then(() => store.close());
    const own = new PostgresJobStore(PG, (config.tracking.store as { table: string }).table, () => undefined);
    await own.drop();
    await own.close();
    await project?.remove();
  });

  it('an unbatched job is available, then active, then completed with its result; cancel of it then is a conflict', async () => {
    const worker = await group('worker');
    const id = await worker.publisher.publish('later', { type: 'doc', args: ['hold', 'pages-3'] });
    expect((await waitFor('the job available', async () => (await row(id))?.state === 'available' && row(id))) as JobRow).to.deep.include({
      queue: 'later',
      type: 'doc',
    });
    await group('late');
    await waitFor('the job active', async () => (await row(id))?.state === 'active');
    holdGate.releaseAll();
    const done = await waitFor('the job completed', async () => ((await row(id))?.state === 'completed' ? row(id) : undefined));
    expect(done).to.deep.include({ attempt: 1, stage: 'late', result: { done: 'pages-3' }, errors: [] });
    expect(done?.started_at).to.be.a('string');
    const status = await statusJson(id);
    expect(status).to.deep.include({ id, state: 'completed', result: { done: 'pages-3' }, queue: 'later' });
    seen.completed = id;
    const cancel = await cli('job', 'cancel', id);
    expect(cancel.code).to.equal(1);
    expect(cancel.stderr).to.match(/completed/);
    expect((await cli('job', 'cancel', '0190a0a0-0000-7000-8000-000000000000')).code).to.equal(1);
  });

  it('a failing job is retryable with an errors entry per attempt, then discarded', async () => {
    const worker = groups[0] as RunningGroup;
    const id = await worker.publisher.publish('work', { type: 'doc', args: ['fail'] });
    const retryable = await waitFor('retryable', async () => ((await row(id))?.state === 'retryable' ? row(id) : undefined));
    expect(retryable?.errors.map((e) => e.attempt)).to.deep.equal([1]);
    const discarded = await waitFor('discarded', async () => ((await row(id))?.state === 'discarded' ? row(id) : undefined));
    expect(discarded?.errors.map((e) => [e.attempt, e.message])).to.deep.equal([
      [1, 'attempt 1 failed'],
      [2, 'attempt 2 failed'],
    ]);
    seen.discarded = id;
    const list = await cli('job', 'list', '--queue', 'work', '--state', 'discarded', '--json');
    expect((JSON.parse(list.stdout) as { jobs: Array<{ id: string }> }).jobs.map((j) => j.id)).to.include(id);
  });

  it('the admin API answers, lists and refuses to cancel as the command line does', async () => {
    const server = await startAdminServer({ configFile: project.file, port: 0, token: 'job-state-token', log, env });
    try {
      const call = async (method: string, url: string): Promise<{ status: number; body: Record<string, unknown> }> => {
        const response = await fetch(`http://127.0.0.1:${server.port}${url}`, {
          method,
          headers: { authorization: 'Bearer job-state-token' },
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      const completed = seen.completed as string;
      const one = await call('GET', `/ojs/v1/jobs/${completed}/status`);
      expect(one.status).to.equal(200);
      expect(one.body).to.deep.equal(await statusJson(completed));
      const list = await call('GET', '/ojs/v1/jobs?queue=work&state=discarded&limit=10');
      expect((list.body.jobs as Array<{ id: string }>).map((job) => job.id)).to.include(seen.discarded);
      expect((await call('GET', '/ojs/v1/jobs?state=nonsense')).status).to.equal(400);
      const conflict = await call('DELETE', `/ojs/v1/jobs/${completed}`);
      expect(conflict.status).to.equal(409);
      expect((conflict.body.error as { code: string }).code).to.equal('conflict');
      expect((await call('DELETE', '/ojs/v1/jobs/0190a0a0-0000-7000-8000-000000000000')).status).to.equal(404);
    } finally {
      await server.close();
    }
  });

  it('a cancelled waiting job is never run and is cancelled; retention prunes it', async () => {
    // `late` is paused by holding nothing: publish while its stage holds a job, so the next one waits.
    const worker = groups[0] as RunningGroup;
    const blocker = await worker.publisher.publish('later', { type: 'doc', args: ['hold'] });
    await waitFor('the blocker active', async () => (await row(blocker))?.state === 'active');
    const id = await worker.publisher.publish('later', { type: 'doc', args: ['ok'] });
    await waitFor('the waiting job known', async () => (await row(id)) !== undefined);
    const cancel = await cli('job', 'cancel', id);
    expect(cancel.code, cancel.stderr).to.equal(0);
    holdGate.releaseAll();
    const cancelled = await waitFor('cancelled by the stage', async () => ((await row(id))?.outcome === 'cancelled' ? row(id) : undefined));
    expect(cancelled?.state).to.equal('cancelled');
    expect(ran).to.not.include(id);
    // Retention (later: cancelled PT1M): not before, pruned after.
    expect(await tracker.prune(new Date())).to.be.a('number');
    expect(await row(id)).to.not.equal(undefined);
    await tracker.prune(new Date(Date.now() + 120_000));
    expect(await row(id)).to.equal(undefined);
  });

  it('a cancel sent right after the publish, before the job store has seen the job, is not refused: the job never runs', async () => {
    const worker = groups[0] as RunningGroup;
    const blocker = await worker.publisher.publish('later', { type: 'doc', args: ['hold'] });
    await waitFor('the blocker active', async () => (await row(blocker))?.state === 'active');
    // No tracker folds for a moment: the store cannot know the job when the cancel asks for it.
    await tracker.close();
    const id = await worker.publisher.publish('later', { type: 'doc', args: ['ok'] });
    // `job cancel`'s own function, in this process: it asks at once.
    const cancel = cancelJob(config, id, log);
    await new Promise((resolve) => setTimeout(resolve, 500));
    tracker = await Tracker.start(config, { log });
    expect((await cancel).state).to.equal('cancelled');
    holdGate.releaseAll();
    const cancelled = await waitFor('cancelled by the stage', async () => ((await row(id))?.outcome === 'cancelled' ? row(id) : undefined));
    expect(cancelled?.state).to.equal('cancelled');
    expect(ran).to.not.include(id);
    // An id no job ever had is still not found, at once.
    const unknown = await cli('job', 'cancel', '0190a0a0-0000-7000-8000-000000000000');
    expect(unknown.code).to.equal(1);
  });

  it('a stage SIGKILLed mid-run leaves its job active, then available again, and it runs again from the suspect queue', async () => {
    const worker = groups[0] as RunningGroup;
    const child = spawnCli(['run', 'crasher', '--config', project.file], { ...env, HANG_HERE: '1' });
    const id = await worker.publisher.publish('crashy', { type: 'doc', args: ['hang'] });
    await waitFor('active in the child', async () => (await row(id))?.state === 'active', 30_000);
    child.kill('SIGKILL');
    await finished(child, 10_000, 'run crasher');
    expect((await row(id))?.state).to.equal('active');
    await group('crasher');
    const done = await waitFor(
      'completed after the crash',
      async () => ((await row(id))?.state === 'completed' ? row(id) : undefined),
      30_000,
    );
    // The redelivery was moved to the suspect queue (reported: available again, attempt 2).
    expect(done?.attempt).to.equal(2);
    expect(done?.errors.map((e) => e.attempt)).to.deep.equal([1]);
    // The states the job went through, folded from its reports in stream order.
    const reports: JobRecord[] = [];
    const connection = await openConnection(config, log, 'job-state-test');
    try {
      const reader = await TrackingReader.open(connection, config, log, (record) => {
        if ((record.kind === 'created' || record.kind === 'settled') && record.job === id) reports.push(record);
      });
      await reader.caughtUp();
      await reader.close();
    } finally {
      await connection.close();
    }
    const states: string[] = [];
    let folded: JobRow | undefined;
    for (const record of reports) {
      folded = foldJob(folded, record, () => undefined);
      if (states.at(-1) !== folded.state) states.push(folded.state);
    }
    expect(states).to.deep.equal(['available', 'active', 'available', 'active', 'completed']);
  });

  it('a stage process reads 10,000 cancelled ids from the job-cancels stream before it runs a job', async () => {
    const connection = await openConnection(config, log, 'job-state-cancels');
    try {
      await ensureTrackingStream(connection, config, 'job-cancels');
      const publisher = await ConfirmPublisher.open(connection);
      const ids = Array.from({ length: 10_000 }, () => uuidv7());
      for (let i = 0; i < ids.length; i += 500) {
        await Promise.all(
          ids
            .slice(i, i + 500)
            .map((job) =>
              publishRecord(publisher, project.names.jobCancels, stamp<DirectiveRecord>({ kind: 'directive', action: 'cancel', job })),
            ),
        );
      }
      await publisher.close();
      const cancels = new JobCancels(connection, config, log);
      try {
        // Before it has read the stream to its end, a lookup waits for it: never a wrong "run".
        expect(await cancels.has(ids[9_999] as string)).to.equal(true);
        expect(cancels.size).to.be.at.least(10_000);
        expect(cancels.has(ids[0] as string)).to.equal(true);
        expect(cancels.has(uuidv7())).to.equal(false);
      } finally {
        await cancels.close();
      }
    } finally {
      await connection.close();
    }
  });

  it('gives the same states after a restart, a SIGKILL mid-stream, and with two trackers at once', async () => {
    await tracker.sync();
    // Every store is pruned at the same time: the `later` jobs (retention PT1M) go, the others stay.
    const future = new Date(Date.now() + 120_000);
    await tracker.prune(future);
    const table = (config.tracking.store as { table: string }).table;
    const snapshot = async (store: PostgresJobStore): Promise<unknown> => (await store.list({}, { limit: 1000 })).jobs;
    const expected = await snapshot(tracker.jobs as PostgresJobStore);
    expect((expected as unknown[]).length).to.be.at.least(2);

    // A restart: the replay writes the same rows again.
    await tracker.close();
    tracker = await Tracker.start(config, { log });
    expect(await snapshot(tracker.jobs as PostgresJobStore)).to.deep.equal(expected);

    // A tracker SIGKILLed mid-stream into its own table, then started again.
    const killedTable = `${table}_k`;
    const file = path.join(project.dir, 'killed.json');
    const raw = JSON.parse(
      JSON.stringify({
        prefix: config.prefix,
        durable: false,
        queues: { _default: { scope: 'shared' }, later: { scope: 'shared', retention: { completed: 'PT1M', cancelled: 'PT1M' } } },
        tracking: { store: { kind: 'postgres', url: PG, table: killedTable } },
      }),
    );
    await writeFile(file, JSON.stringify(raw));
    const killedStore = new PostgresJobStore(PG, killedTable, () => undefined);
    stores.push(killedStore);
    const first = spawnCli(['tracker', '--config', file], env);
    await waitFor(
      'the killed tracker writing',
      async () => (await killedStore.list({}, { limit: 1 }).catch(() => ({ jobs: [] }))).jobs.length > 0,
      30_000,
      5,
    );
    first.kill('SIGKILL');
    await finished(first, 10_000, 'tracker');
    const killedConfig = await loadConfig(file, env);
    const again = await Tracker.start(killedConfig, { log });
    await again.close();
    await killedStore.prune(future);
    expect(await snapshot(killedStore)).to.deep.equal(expected);

    // Two trackers at once into one fresh table.
    const twinStore = new PostgresJobStore(PG, `${table}_t`, retentionOf(config));
    const twins = await Promise.all([
      Tracker.start(config, { log, jobs: twinStore }),
      Tracker.start(config, { log, jobs: new PostgresJobStore(PG, `${table}_t`, retentionOf(config)) }),
    ]);
    for (const twin of twins) await twin.sync();
    await twinStore.prune(future);
    expect(await snapshot(twinStore)).to.deep.equal(expected);
    await twinStore.drop();
    for (const twin of twins) await twin.close();
  });
});
