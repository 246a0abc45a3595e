import path from 'node:path';
import { expect } from 'chai';
import { startAdminServer } from '../../src/http-api/admin-server.js';
import { Tracker } from '../../src/tracker/tracker.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { DuplicateJobError } from '../../src/errors/errors.js';
import { shownState, type JobRow } from '../../src/job-state/job-lifecycle.js';
import { PostgresJobStore } from '../../src/job-state/postgres-job-store.js';
import type { PublishSpec, UniquePolicy } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { holdGate, ran } from '../fixtures/job-state-stages.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/job-state-stages.js');
const PG = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const STAGES = [
  { name: 'worker', input: 'work', outputs: [] },
  { name: 'late', input: 'later', outputs: [] },
] as unknown as StageMetadata[];
const log = createLogger({ test: 'unique-jobs' }, 'error');

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => expect.fail(`expected a rejection, got ${JSON.stringify(value)}`),
    (err: unknown) => err,
  );
}

/**
 * Unique jobs against PostgreSQL and the broker (docs/unique-jobs.md; OJS unique jobs 14). The
 * `later` queue has no stage running in most cases, so its jobs stay `available` (a held key);
 * `work` has one, which completes `ok` jobs (a key released by the default states).
 */
describe('unique jobs: keys claimed in the PostgreSQL job store at enqueue (docs/unique-jobs.md)', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let config: CompiledConfig;
  let tracker: Tracker;
  let running: RunningGroup;

  const row = async (id: string): Promise<JobRow | undefined> => {
    await tracker.sync();
    return (tracker.jobs as PostgresJobStore).get(id);
  };
  /** A job for `queue` with one object argument and a unique policy keyed on its `doc`. */
  const spec = (doc: string, unique: UniquePolicy, mode = 'ok'): PublishSpec => ({
    type: 'doc.ocr',
    args: [{ doc, mode }],
    unique: { keys: ['type', 'args'], args_keys: ['doc'], ...unique },
  });
  // The fixture stage reads args[0] as its mode: an object is neither `fail` nor `hold`, so it completes.
  const publish = (queue: string, doc: string, unique: UniquePolicy): Promise<string> =>
    running.publisher.publish(queue, spec(doc, unique));

  before(async () => {
    project = await writeConfigFile(
      {
        queues: { _default: { scope: 'shared' } },
        tracking: { store: { kind: 'postgres', url: PG } },
        stages: { worker: { module: MODULE }, late: { module: MODULE } },
      },
      STAGES,
      'unique-jobs',
    );
    config = project.config;
    tracker = await Tracker.start(config, { log });
    running = await startGroup(config, [{ stage: 'worker' }], log);
  });

  after(async () => {
    holdGate.releaseAll();
    await tracker?.close();
    await running?.stop();
    if (config !== undefined) {
      const own = new PostgresJobStore(PG, (config.tracking.store as { table: string }).table, () => undefined);
      await own.drop();
      await own.close();
    }
    await project?.remove();
  });

  it('refuses a duplicate within the window with DUPLICATE naming the first job, and accepts it once the window ran out', async () => {
    const began = Date.now();
    const first = await publish('later', 'invoice-1', { period: 'PT3S' });
    const err = await rejection(publish('later', 'invoice-1', { period: 'PT3S' }));
    expect(err).to.be.instanceOf(DuplicateJobError);
    expect((err as DuplicateJobError).code).to.equal('DUPLICATE');
    expect((err as DuplicateJobError).details).to.deep.include({ existing_job_id: first, existing_job_state: 'available' });
    // Another document is another key.
    expect(await publish('later', 'invoice-2', { period: 'PT3S' })).to.be.a('string');
    // Refused until the window (3 s from the first claim) runs out, then accepted: a new job.
    const second = await waitFor(
      'the duplicate accepted after the window',
      () => publish('later', 'invoice-1', { period: 'PT3S' }).catch(() => undefined),
      20_000,
      200,
    );
    expect(second).to.not.equal(first);
    expect(Date.now() - began).to.be.at.least(2_900);
    const known = await waitFor('both jobs in the store', async () => ((await row(second)) !== undefined ? row(first) : undefined));
    expect(shownState(known)).to.equal('available');
  });

  it('of 8 concurrent enqueues of one key with reject, exactly one is published and the others are refused', async () => {
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => publish('later', 'race-1', {})));
    const published = results.filter((result) => result.status === 'fulfilled');
    expect(published).to.have.length(1);
    for (const result of results) if (result.status === 'rejected') expect(result.reason).to.be.instanceOf(DuplicateJobError);
  });

  it('ignore answers the first job id and publishes nothing', async () => {
    const first = await publish('later', 'ignore-1', { on_conflict: 'ignore' });
    const again = await publish('later', 'ignore-1', { on_conflict: 'ignore' });
    expect(again).to.equal(first);
    // Nothing else of the key reached the broker: the later queue holds the first job only.
    await tracker.sync();
    const jobs = await (tracker.jobs as PostgresJobStore).list({ queue: 'later', type: 'doc.ocr' }, { limit: 1000 });
    const mine = jobs.jobs.filter((job) => job.id === first || job.id === again);
    expect(mine).to.have.length(1);
  });

  it('replace cancels the waiting holder and publishes the new job; replace_except_schedule keeps the holder schedule', async () => {
    const first = await publish('later', 'replace-1', { on_conflict: 'replace' });
    const second = await publish('later', 'replace-1', { on_conflict: 'replace' });
    expect(second).to.not.equal(first);
    await waitFor('the replaced job cancelled', async () => {
      const found = await row(first);
      return found !== undefined && shownState(found) === 'cancelled';
    });
    const at = new Date(Date.now() + 600_000).toISOString().replace(/\.\d+Z$/, '.000Z');
    const scheduled = await running.publisher.publish('later', {
      ...spec('replace-2', { on_conflict: 'replace_except_schedule' }),
      scheduled_at: at,
    });
    await waitFor('the scheduled job in the store', async () => (await row(scheduled))?.state === 'scheduled');
    const later = new Date(Date.now() + 900_000).toISOString();
    const replacement = await running.publisher.publish('later', {
      ...spec('replace-2', { on_conflict: 'replace_except_schedule' }),
      scheduled_at: later,
    });
    const found = await waitFor('the replacement in the store', () => row(replacement));
    expect(found.scheduled_at).to.equal(at);
  });

  it('a completed holder releases the key under the default states, and holds it when the states name completed', async () => {
    const first = await publish('work', 'done-1', {});
    await waitFor('the first completed', async () => (await row(first))?.state === 'completed');
    expect(ran).to.include(first);
    const second = await publish('work', 'done-1', {});
    expect(second).to.not.equal(first);
    const kept = { states: ['available', 'active', 'scheduled', 'retryable', 'pending', 'completed'] } as UniquePolicy;
    const third = await publish('work', 'done-2', kept);
    await waitFor('the third completed', async () => (await row(third))?.state === 'completed');
    const err = await rejection(publish('work', 'done-2', kept));
    expect((err as DuplicateJobError).details).to.deep.include({ existing_job_id: third, existing_job_state: 'completed' });
  });

  it('POST /ojs/v1/jobs: 409 duplicate with the existing job id; ignore answers 200 with deduplicated and the first job', async () => {
    const server = await startAdminServer({ configFile: project.file, port: 0, token: 'unique-token', log, env: { AMQP_URL } });
    try {
      const push = async (body: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
        const response = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/jobs`, {
          method: 'POST',
          headers: { authorization: 'Bearer unique-token', 'content-type': 'application/openjobspec+json' },
          body: JSON.stringify(body),
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      const job = (onConflict: string) => ({
        type: 'doc.ocr',
        args: [{ doc: `http-${onConflict}` }],
        options: { queue: 'later', unique: { keys: ['args'], args_keys: ['doc'], on_conflict: onConflict } },
      });
      const created = await push(job('reject'));
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const id = (created.body.job as { id: string }).id;
      const refused = await push(job('reject'));
      expect(refused.status).to.equal(409);
      expect(refused.body.error).to.deep.include({ code: 'duplicate' });
      expect((refused.body.error as { details: Record<string, unknown> }).details).to.deep.include({ existing_job_id: id });
      const first = await push(job('ignore'));
      expect(first.status).to.equal(201);
      const again = await push(job('ignore'));
      expect(again.status).to.equal(200);
      expect(again.body).to.deep.include({ deduplicated: true });
      expect(again.body.job).to.deep.include({ id: (first.body.job as { id: string }).id, state: 'available' });
      const invalid = await push({ ...job('reject'), options: { queue: 'later', unique: { keys: ['meta'] } } });
      expect(invalid.status).to.equal(400);
    } finally {
      await server.close();
    }
  });
});

/**
 * The memory job store (docs/unique-jobs.md): `stagecoach admin` folds job states in its own
 * process, so its pushes claim keys there; the reset of a test server forgets them.
 */
describe('unique jobs with the memory store: the pushes of stagecoach admin', function () {
  this.timeout(120_000);
  let project: ConfigFile;

  before(async () => {
    project = await writeConfigFile({ queues: { _default: { scope: 'shared' }, later: {} }, stages: {} }, [], 'unique-memory');
  });

  after(async () => {
    await project?.remove();
  });

  it('POST /ojs/v1/jobs: the second push of a key is 409 duplicate naming the first; after POST /ojs/v1/admin/reset it is accepted', async () => {
    const server = await startAdminServer({
      configFile: project.file,
      port: 0,
      token: 'memory-token',
      log,
      env: { AMQP_URL },
      testReset: true,
    });
    try {
      const call = async (route: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
        const response = await fetch(`http://127.0.0.1:${server.port}${route}`, {
          method: 'POST',
          headers: { authorization: 'Bearer memory-token', 'content-type': 'application/openjobspec+json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      const job = {
        type: 'doc.ocr',
        args: [{ doc: 'scan-1' }],
        options: { queue: 'later', unique: { keys: ['args'], args_keys: ['doc'] } },
      };
      const first = await call('/ojs/v1/jobs', job);
      expect(first.status, JSON.stringify(first.body)).to.equal(201);
      const again = await call('/ojs/v1/jobs', job);
      expect(again.status, JSON.stringify(again.body)).to.equal(409);
      expect((again.body.error as { details: Record<string, unknown> }).details).to.deep.include({
        existing_job_id: (first.body.job as { id: string }).id,
      });
      expect((await call('/ojs/v1/admin/reset')).status).to.equal(200);
      expect((await call('/ojs/v1/jobs', job)).status).to.equal(201);
    } finally {
      await server.close();
    }
  });
});
