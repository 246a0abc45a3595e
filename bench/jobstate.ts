import { Tracker } from '../src/batch/tracker.js';
import { PostgresJobStore } from '../src/job-state/postgres-job-store.js';
import {
  expectCounts,
  fill,
  fmt,
  progress,
  purgeQueues,
  sleep,
  summarise,
  type BenchContext,
  type Round,
  type ThroughputResult,
} from './common.js';
import { physical, SETTLE_MS, stagecoachRound } from './throughput.js';

/**
 * Job tracking on against off (docs/job-state.md): the same relay handler, job size, prefetch and
 * concurrency; "off" relays `relay_b` -> `relay_a` (queues with `tracking: false`), "on" relays
 * `js_a` <-> `js_b` (`tracking: true`: every job reported created... started, completed) while a
 * `Tracker` folds the stream into the PostgreSQL job store. After each "on" round it measures the
 * store's lag: the time from the last settlement until the tracker has written every report made
 * before it (`Tracker.sync`: a mark written, read back, and every write before it committed).
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
  const tracker = await Tracker.start(ctx.config, { log: ctx.log });
  try {
    await fill(ctx, 'relay_b', n);
    await fill(ctx, 'js_a', n);
    await tracker.sync();
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
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
        const round = await stagecoachRound(ctx, [stage], n, `jobstate round ${r} (on)`);
        const settled = performance.now();
        await tracker.sync();
        lags.push(performance.now() - settled);
        await expectCounts(ctx.opts.url, forwards ? { [ja]: 0, [jb]: n } : { [ja]: n, [jb]: 0 }, `jobstate round ${r} (on)`);
        on.push(round);
        await sleep(SETTLE_MS);
      };
      if (forwards) {
        await runOff();
        await runOn();
      } else {
        await runOn();
        await runOff();
      }
    }
  } finally {
    await tracker.close().catch(() => undefined);
    await purgeQueues(ctx.opts.url, [a, b, ja, jb]).catch(() => undefined);
    const store = ctx.config.tracking.store;
    if (store.kind === 'postgres') {
      const jobs = new PostgresJobStore(store.url, store.table, () => undefined);
      await jobs.drop().catch(() => undefined);
      await jobs.close();
    }
  }
  const sorted = [...lags].sort((x, y) => x - y);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  const worst = sorted.at(-1) ?? 0;
  const side = (rounds: Round[], as: Round['side']): Round[] => rounds.map((round) => ({ ...round, side: as }));
  progress(`  job store current ${fmt(Math.round(median))} ms after the last settlement (median; worst ${fmt(Math.round(worst))} ms)`);
  return [
    summarise(
      'jobstate',
      `relay, job tracking on with the PostgreSQL store (stagecoach column) vs off (baseline column); ratio on / off; store current ${Math.round(median)} ms after the last settlement (worst ${Math.round(worst)} ms)`,
      [...side(off, 'baseline'), ...side(on, 'stagecoach')],
    ),
  ];
}
