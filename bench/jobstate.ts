import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { PostgresJobStore } from '../src/job-state/postgres-job-store.js';
import {
  alternatingRounds,
  asSide,
  expectCounts,
  fill,
  fmt,
  HERE,
  progress,
  purgeQueues,
  sleep,
  stopProcess,
  summarise,
  withTimeout,
  type BenchContext,
  type Round,
  type ThroughputResult,
} from './common.js';
import { physical, SETTLE_MS, stagecoachRound } from './throughput.js';
import { pidsNamed, processCpuNow } from './broker-cpu.js';

/**
 * Job tracking on against off (docs/job-state.md): the same relay handler, job size, prefetch and
 * concurrency; "off" relays `relay_b` -> `relay_a` (queues with `tracking: false`), "on" relays
 * `js_a` <-> `js_b` (`tracking: true`: every job reported started and completed, its children
 * named) while `stagecoach tracker`, in a process of its own as in production, folds the stream
 * into the PostgreSQL job store. After each "on" round it measures the store's lag: the time from
 * the last settlement until the store shows every job of the round `completed` (polled every 20 ms).
 *
 * @returns the on / off row, with the lag in the description (median and worst).
 */
export async function benchJobState(ctx: BenchContext): Promise<ThroughputResult[]> {
  const n = ctx.opts.jobs;
  const [a, b] = [physical(ctx, 'relay_a'), physical(ctx, 'relay_b')];
  const [ja, jb] = [physical(ctx, 'js_a'), physical(ctx, 'js_b')];
  progress(
    `jobstate: ${fmt(n)} jobs per round, relay with job tracking on (PostgreSQL store, a tracker running) vs off, prefetch ${ctx.opts.prefetch}`,
  );
  const off: Round[] = [];
  const on: Round[] = [];
  const lags: number[] = [];
  const store = ctx.config.tracking.store;
  if (store.kind !== 'postgres') throw new Error('jobstate: the bench configuration has no PostgreSQL job store');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-jobstate-'));
  const file = path.join(dir, 'stagecoach.json');
  // The tracker needs the prefix, the broker, the store and the queues' settings: no stages.
  await writeFile(file, JSON.stringify({ ...ctx.raw, stages: {} }));
  const tracker: ChildProcess = spawn(process.execPath, [path.join(HERE, '../../bin/stagecoach.js'), 'tracker', '--config', file], {
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const db = new pg.Pool({ connectionString: store.url, max: 1 });
  const completed = async (queue: string): Promise<number> => {
    const result = await db
      .query<{ n: number }>(`SELECT count(*)::int AS n FROM "${store.table}" WHERE queue = $1 AND state = 'completed'`, [queue])
      .catch(() => ({ rows: [{ n: 0 }] }));
    return result.rows[0]?.n ?? 0;
  };
  const done = { js_a: 0, js_b: 0 };
  // CPU (µs) of the tracker and of every PostgreSQL process (the server and its backends), by pid:
  // what folding the "on" rounds into the store costs beside the relay, on the same cores.
  const folding = (): Map<string, number> => {
    const cpu = new Map<string, number>();
    for (const pid of [...(tracker.pid === undefined ? [] : [String(tracker.pid)]), ...pidsNamed('postgres')]) {
      const used = processCpuNow([pid]);
      if (used !== undefined) cpu.set(pid, used);
    }
    return cpu;
  };
  const spent = (before: Map<string, number>, after: Map<string, number>): { tracker: number; postgres: number } => {
    const used = { tracker: 0, postgres: 0 };
    // A backend that started during the round counts whole; one that ended in it is missed.
    for (const [pid, cpu] of after) used[pid === String(tracker.pid) ? 'tracker' : 'postgres'] += cpu - (before.get(pid) ?? 0);
    return used;
  };
  const folded: Array<{ tracker: number; postgres: number }> = [];
  try {
    await fill(ctx, 'relay_b', n);
    await fill(ctx, 'js_a', n);
    await alternatingRounds(ctx.opts.rounds, (r) => {
      const forwards = r % 2 === 1;
      const runOff = async (): Promise<void> => {
        const from = forwards ? 'relay_ba' : 'relay_ab';
        const round = await stagecoachRound(ctx, [from], n, `jobstate round ${r} (off)`);
        await expectCounts(ctx.opts.url, forwards ? { [a]: n, [b]: 0 } : { [a]: 0, [b]: n }, `jobstate round ${r} (off)`);
        off.push(round);
        await sleep(SETTLE_MS);
      };
      const runOn = async (): Promise<void> => {
        const stage = forwards ? 'js_ab' : 'js_ba';
        const before = folding();
        const round = await stagecoachRound(ctx, [stage], n, `jobstate round ${r} (on)`);
        const settled = performance.now();
        const input = forwards ? 'js_a' : 'js_b';
        done[input] += n;
        await withTimeout(
          (async () => {
            while ((await completed(input)) < done[input]) await sleep(20);
          })(),
          60_000,
          `jobstate round ${r}: the job store showing the round's ${fmt(n)} jobs completed`,
        );
        lags.push(performance.now() - settled);
        // Until the store holds the round: the fold's work for it is done by then.
        folded.push(spent(before, folding()));
        await expectCounts(ctx.opts.url, forwards ? { [ja]: 0, [jb]: n } : { [ja]: n, [jb]: 0 }, `jobstate round ${r} (on)`);
        on.push(round);
        await sleep(SETTLE_MS);
      };
      return [runOff, runOn];
    });
  } finally {
    await stopProcess(tracker, 'the tracker');
    await db.end().catch(() => undefined);
    await purgeQueues(ctx.opts.url, [a, b, ja, jb]).catch(() => undefined);
    const jobs = new PostgresJobStore(store.url, store.table, () => undefined);
    await jobs.drop().catch(() => undefined);
    await jobs.close();
    await rm(dir, { recursive: true, force: true });
  }
  const sorted = [...lags].sort((x, y) => x - y);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  const worst = sorted.at(-1) ?? 0;
  progress(`  job store current ${fmt(Math.round(median))} ms after the last settlement (median; worst ${fmt(Math.round(worst))} ms)`);
  const jobsOn = n * folded.length;
  const perJob = (side: 'tracker' | 'postgres'): number => Math.round(folded.reduce((sum, round) => sum + round[side], 0) / jobsOn);
  const cost = folded.length === 0 ? '' : `; folding CPU per job: tracker ${perJob('tracker')} µs, PostgreSQL ${perJob('postgres')} µs`;
  if (folded.length > 0)
    progress(`  folding into the store, CPU per job: tracker ${perJob('tracker')} µs, PostgreSQL ${perJob('postgres')} µs`);
  return [
    summarise(
      'jobstate',
      `relay, job tracking on with the PostgreSQL store (stagecoach column) vs off (baseline column); ratio on / off; store current ${Math.round(median)} ms after the last settlement (worst ${Math.round(worst)} ms)${cost}`,
      [...asSide(off, 'baseline'), ...asSide(on, 'stagecoach')],
    ),
  ];
}
