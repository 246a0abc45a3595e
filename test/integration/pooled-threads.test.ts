import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BroadcastChannel } from 'node:worker_threads';
import { expect } from 'chai';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { StagecoachError } from '../../src/errors/errors.js';
import type { EmitSpec, Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { loadStage, type LoadedStage } from '../../src/stage/stage-loader.js';
import type { StageContext } from '../../src/stage/stage.types.js';
import { createPooledThreadedHandler, ThreadCrashError, type PooledThreadedHandler } from '../../src/stage/threads/threaded-handler.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { TENANT_HOLDS, TENANT_REPORTS, UNBUILDABLE, type Sighting } from '../fixtures/tenant-stages.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'pooled-threads' }, 'error');

function rawConfig(module = './tenant-stages.js'): RawConfig {
  return { tenants: ['acme', 'globex'], stages: { tenanted: { module, threads: 2 } } };
}

/** `thread/serial`: the serial counts the instances built in that thread, from 1. */
const serial = (instance: string): number => Number(instance.split('/')[1]);

describe('one worker-thread pool for many tenants', function () {
  this.timeout(60000);

  let config: CompiledConfig;
  let stage: LoadedStage;
  let reports: BroadcastChannel;
  let holds: BroadcastChannel;
  const received: Array<Record<string, unknown>> = [];
  let pools: PooledThreadedHandler[] = [];
  let nextJob = 0;

  before(async () => {
    config = withTestConfig(rawConfig(), path.join(here, '../fixtures/config.json'));
    stage = await loadStage(config, 'tenanted');
    reports = new BroadcastChannel(TENANT_REPORTS);
    reports.onmessage = (event: unknown) => received.push((event as { data: Record<string, unknown> }).data);
    holds = new BroadcastChannel(TENANT_HOLDS);
  });

  after(() => {
    reports?.close();
    holds?.close();
  });

  afterEach(async () => {
    await Promise.all(pools.map((pool) => pool.close(0)));
    pools = [];
    received.length = 0;
  });

  async function pool(threads = 2, abortGraceMs?: number): Promise<PooledThreadedHandler> {
    const created = await createPooledThreadedHandler({
      stage,
      config,
      variant: undefined,
      threads,
      log,
      ...(abortGraceMs === undefined ? {} : { abortGraceMs }),
    });
    pools.push(created);
    return created;
  }

  const job = (tenant: string, args: unknown[]): Job => ({
    specversion: '1.0',
    id: `job-${++nextJob}`,
    type: 'sighting',
    queue: 'tenanted',
    args,
    meta: {},
    attempt: 1,
    created_at: new Date().toISOString(),
    tenant,
  });

  /** A context for `tenant`'s job, as the runner's would be; the sighting the job emits lands in `seen`. */
  function context(tenant: string, seen: Sighting[], signal = new AbortController().signal): StageContext {
    return {
      stage: 'tenanted',
      tenant,
      headers: { 'x-ojs-tenant': tenant },
      signal,
      log,
      progress: () => undefined,
      emit: ((_output: string, spec: EmitSpec) => {
        seen.push((spec.args as [Sighting])[0]);
        return Promise.resolve(`id-${seen.length}`);
      }) as StageContext['emit'],
      confirmed: () => Promise.resolve(),
    };
  }

  /** Runs one job of `tenant`. */
  async function who(handler: PooledThreadedHandler, tenant: string, key: string): Promise<Sighting> {
    const seen: Sighting[] = [];
    await handler.handle(job(tenant, ['who', key]), context(tenant, seen));
    return seen[0];
  }

  /**
   * Runs two jobs of `tenant` that wait for each other: a thread runs one job at a time, so
   * both held at once proves they run on two different threads (once a replaced thread is up).
   */
  async function onBothThreads(handler: PooledThreadedHandler, tenant: string, keys: [string, string]): Promise<Sighting[]> {
    const seen: Sighting[] = [];
    const done = Promise.all(keys.map((key) => handler.handle(job(tenant, ['hold', key]), context(tenant, seen))));
    await waitFor(`${keys.join(' and ')} held at once`, () => keys.every((key) => received.some((r) => r.holding === key)), 20000);
    for (const key of keys) holds.postMessage({ go: key });
    await done;
    expect(new Set(seen.map((s) => s.thread)).size, 'threads that ran the two jobs').to.equal(2);
    return seen;
  }

  const byThread = (sightings: Sighting[]): Map<number, string> => new Map(sightings.map((s) => [s.thread, s.instance]));

  const rejection = async (promise: Promise<unknown>): Promise<Error> => {
    try {
      await promise;
    } catch (err) {
      return err as Error;
    }
    throw new Error('expected a rejection');
  };

  it("gives each tenant's jobs that tenant's own instance and singletons, built once per tenant in each thread that runs them", async () => {
    const handler = await pool(2);
    const seen: Sighting[] = [];
    const jobs: Array<Promise<unknown>> = [];
    for (let i = 0; i < 10; i++) {
      for (const tenant of ['acme', 'globex']) jobs.push(handler.handle(job(tenant, ['who', `${tenant}-${i}`]), context(tenant, seen)));
    }
    await Promise.all(jobs);
    expect(seen).to.have.length(20);

    for (const sighting of seen) {
      const tenant = sighting.key.split('-')[0];
      expect(sighting, sighting.key).to.include({ injected: tenant, tenant, ledgerTenant: tenant, builtForTenant: 1 });
      expect(
        sighting.seen.filter((key) => !key.startsWith(`${tenant}-`)),
        `jobs of another tenant seen by the singleton of ${sighting.key}'s instance`,
      ).to.deep.equal([]);
    }
    // One instance per tenant per thread; its singleton saw exactly the jobs that instance ran.
    for (const tenant of ['acme', 'globex']) {
      const ofTenant = seen.filter((s) => s.injected === tenant);
      const instancesByThread = new Map<number, Set<string>>();
      for (const s of ofTenant) instancesByThread.set(s.thread, (instancesByThread.get(s.thread) ?? new Set()).add(s.instance));
      for (const [thread, instances] of instancesByThread)
        expect([...instances], `${tenant}'s instances in thread ${thread}`).to.have.length(1);
      for (const instance of new Set(ofTenant.map((s) => s.instance))) {
        const ran = ofTenant.filter((s) => s.instance === instance).map((s) => s.key);
        const last = ofTenant.filter((s) => s.instance === instance).reduce((a, b) => (b.seen.length > a.seen.length ? b : a));
        expect([...last.seen].sort(), `the jobs ${instance}'s singleton saw`).to.deep.equal([...ran].sort());
      }
    }
    const acme = new Set(seen.filter((s) => s.injected === 'acme').map((s) => s.instance));
    const globex = new Set(seen.filter((s) => s.injected === 'globex').map((s) => s.instance));
    expect(
      [...acme].filter((instance) => globex.has(instance)),
      'instances shared by the tenants',
    ).to.deep.equal([]);
    // Built on first use, not at start: a thread's instances are numbered 1, 2, ... in the order built.
    const serialsByThread = new Map<number, Set<number>>();
    for (const s of seen) serialsByThread.set(s.thread, (serialsByThread.get(s.thread) ?? new Set()).add(serial(s.instance)));
    for (const [thread, serials] of serialsByThread) {
      expect([...serials].sort(), `instances built in thread ${thread}`).to.deep.equal([...Array(serials.size).keys()].map((n) => n + 1));
    }
  });

  it("drops a released tenant's instances in every thread, disposing of them once the job using one has settled; the other tenant keeps its own", async () => {
    const handler = await pool(2);
    const acmeBefore = byThread(await onBothThreads(handler, 'acme', ['a1', 'a2']));
    const globexBefore = byThread(await onBothThreads(handler, 'globex', ['g1', 'g2']));

    // Released while one of acme's instances runs a job: the job finishes on it, then it goes.
    const events: string[] = [];
    const heldSeen: Sighting[] = [];
    const ctx = context('acme', heldSeen);
    const emit = ctx.emit;
    const running = handler.handle(job('acme', ['hold', 'a3']), {
      ...ctx,
      emit: ((output: string, spec: EmitSpec) => {
        events.push('job emitted');
        return emit(output, spec);
      }) as StageContext['emit'],
    });
    const holding = await waitFor('a3 held', () => received.find((r) => r.holding === 'a3'));
    const heldInstance = holding.instance as string;
    const idleInstance = [...acmeBefore.values()].find((instance) => instance !== heldInstance) as string;
    expect([...acmeBefore.values()], 'the instance the held job runs on').to.include(heldInstance);
    const disposed = (): unknown[] => received.filter((r) => r.disposed !== undefined).map((r) => r.disposed);
    const released = handler.release('acme').then(() => events.push('release resolved'));
    // The release reached both threads at once: the idle one disposes at once, the busy one waits.
    await waitFor("acme's instance on the idle thread disposed of", () => disposed().includes(idleInstance));
    expect(disposed(), 'disposed of while its job runs').to.not.include(heldInstance);
    holds.postMessage({ go: 'a3' });
    await Promise.all([running, released]);
    expect(events).to.deep.equal(['job emitted', 'release resolved']);
    expect(heldSeen[0].instance).to.equal(heldInstance);
    // The reports travel on their own channel: they may arrive a moment after release() resolved.
    await waitFor("the held job's instance disposed of", () => disposed().includes(heldInstance), 5000);
    expect(disposed().sort()).to.deep.equal([...acmeBefore.values()].sort());

    const acmeAfter = await onBothThreads(handler, 'acme', ['a4', 'a5']);
    for (const sighting of acmeAfter) {
      expect(sighting.instance, 'a new instance').to.not.equal(acmeBefore.get(sighting.thread));
      expect(sighting).to.deep.include({ injected: 'acme', builtForTenant: 2, seen: [sighting.key] });
    }
    expect(byThread(await onBothThreads(handler, 'globex', ['g3', 'g4'])), "globex's instances").to.deep.equal(globexBefore);
    expect(disposed(), 'instances disposed of in all').to.have.length(2);
  });

  it('replaces a thread that dies under one tenant’s job; the other thread keeps both tenants’ instances, the new one builds its own', async () => {
    const handler = await pool(2);
    const acmeBefore = byThread(await onBothThreads(handler, 'acme', ['a1', 'a2']));
    const globexBefore = byThread(await onBothThreads(handler, 'globex', ['g1', 'g2']));

    const crash = await rejection(handler.handle(job('acme', ['crash', 'boom']), context('acme', [])));
    expect(crash).to.be.instanceOf(ThreadCrashError);
    expect(crash.message).to.equal('worker thread died: crash boom');

    const acmeAfter = byThread(await onBothThreads(handler, 'acme', ['a3', 'a4']));
    const globexAfter = await onBothThreads(handler, 'globex', ['g3', 'g4']);
    const oldThreads = [...acmeBefore.keys()];
    const survivor = [...acmeAfter.keys()].filter((thread) => oldThreads.includes(thread));
    const replacement = [...acmeAfter.keys()].filter((thread) => !oldThreads.includes(thread));
    expect(survivor, 'threads that survived').to.have.length(1);
    expect(replacement, 'threads that replaced the dead one').to.have.length(1);
    expect(acmeAfter.get(survivor[0]), "acme's instance on the surviving thread").to.equal(acmeBefore.get(survivor[0]));
    const globexOnSurvivor = globexAfter.find((s) => s.thread === survivor[0]) as Sighting;
    expect(globexOnSurvivor.instance, "globex's instance on the surviving thread").to.equal(globexBefore.get(survivor[0]));
    expect(globexOnSurvivor.seen, 'its singleton kept the job it ran before the crash').to.have.length(2);
    expect(['g1', 'g2']).to.include(globexOnSurvivor.seen[0]);
    // The replacement built nothing at start: acme's instance is its first, globex's its second.
    expect(serial(acmeAfter.get(replacement[0]) as string)).to.equal(1);
    const globexOnReplacement = globexAfter.find((s) => s.thread === replacement[0]) as Sighting;
    expect(globexOnReplacement).to.deep.include({ builtForTenant: 1, seen: [globexOnReplacement.key] });
    expect(serial(globexOnReplacement.instance)).to.equal(2);
  });

  it('fails only the job of a tenant whose instance cannot be built, and keeps the thread', async () => {
    const handler = await pool(1);
    const first = await who(handler, 'acme', 'before');
    const error = await rejection(handler.handle(job(UNBUILDABLE, ['who', 'x']), context(UNBUILDABLE, [])));
    expect(error).to.include({ name: 'Error', message: `no instance for ${UNBUILDABLE}` });
    const after = await who(handler, 'acme', 'after');
    expect(after).to.include({ thread: first.thread, instance: first.instance });
    expect(after.seen).to.deep.equal(['before', 'after']);
  });

  it('terminates a thread whose handler ignores its abort; the tenant’s next job gets a new instance on the replacement', async () => {
    const handler = await pool(1, 200);
    const before = await who(handler, 'acme', 'before');
    const controller = new AbortController();
    const stuck = handler.handle(job('acme', ['hold', 'stuck']), context('acme', [], controller.signal));
    await waitFor('the stuck job held', () => received.some((r) => r.holding === 'stuck'));
    controller.abort(new StagecoachError('HANDLER_TIMEOUT', 'too slow'));
    expect(await rejection(stuck)).to.include({ code: 'HANDLER_TIMEOUT' });
    const after = await who(handler, 'acme', 'after');
    expect(after.thread).to.not.equal(before.thread);
    expect(after).to.deep.include({ injected: 'acme', builtForTenant: 1, seen: ['after'] });
  });

  it("hands a runner one tenant's handler: that tenant's jobs only, and nothing that closes the shared pool", async () => {
    const handler = await pool(1);
    const acme = handler.forTenant('acme');
    expect(acme).to.not.have.property('close');
    const seen: Sighting[] = [];
    await acme.handle(job('acme', ['who', 'mine']), context('acme', seen));
    expect(seen[0]).to.include({ injected: 'acme', tenant: 'acme' });
    const refused = await rejection(acme.handle(job('globex', ['who', 'theirs']), context('globex', seen)));
    expect(refused).to.include({ code: 'INVALID_REQUEST' });
    expect(seen, 'jobs that ran').to.have.length(1);
    const globex = await who(handler, 'globex', 'theirs');
    expect(globex.instance, "globex's own instance on the same thread").to.not.equal(seen[0].instance);
  });

  it('fails creation, before any job, when the threads cannot load the stage module', async () => {
    const broken = withTestConfig(rawConfig('./no-such-stages.js'), path.join(here, '../fixtures/config.json'));
    const error = await rejection(createPooledThreadedHandler({ stage, config: broken, variant: undefined, threads: 2, log }));
    expect(error).to.be.instanceOf(StagecoachError);
    expect(error).to.include({ name: 'StageNotFoundError', code: 'STAGE_NOT_FOUND' });
    expect(error.message).to.include('no-such-stages.js');
  });
});
