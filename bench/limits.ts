import { compileConfig } from '../src/config/compile-config.js';
import type { RawConfig } from '../src/config/config.types.js';
import {
  asSide,
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

/** The rate of the `limits` scenario's second part: starts per second the relay is held to. */
const RATE = 200;

/**
 * Flow limits (docs/flow-control.md), two rows:
 * - `limit-idle`: the relay with a concurrency limit configured but never reached (10,000 against
 *   a stage concurrency of the prefetch) against the same relay without it, alternated round by
 *   round on the same backlog (relay_b -> relay_a, then back with relay_ab): what taking and
 *   giving back tokens costs when the limit holds nobody back. Target >= 0.95.
 * - `limit-rate`: the relay under `rate: 200 per PT1S`: the starts per second achieved (jobs over
 *   the run's time plus one window, see below) against the limit. Target >= 0.95.
 */
export async function benchLimits(ctx: BenchContext): Promise<ThroughputResult[]> {
  const n = ctx.opts.jobs;
  const [a, b] = [physical(ctx, 'relay_a'), physical(ctx, 'relay_b')];
  const idle = withLimits(ctx, { 'bench-idle': { concurrency: 10_000 } }, 'bench-idle');
  progress(`limits: ${fmt(n)} jobs per round, relay with an idle concurrency limit vs none; then ${RATE}/s`);
  const none: Round[] = [];
  const limited: Round[] = [];
  const rates: Round[] = [];
  try {
    await fill(ctx, 'relay_b', n);
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
      // relay_b -> relay_a without the limit, then back relay_a -> relay_b with it; the order alternates.
      const runs = [
        async (stage: string, backTo: Record<string, number>) => {
          none.push(await stagecoachRound(ctx, [stage], n, `limits round ${r} (none)`));
          await expectCounts(ctx.opts.url, backTo, `limits round ${r} (none)`);
        },
        async (stage: string, backTo: Record<string, number>) => {
          limited.push(await stagecoachRound({ ...ctx, config: idle }, [stage], n, `limits round ${r} (idle limit)`));
          await expectCounts(ctx.opts.url, backTo, `limits round ${r} (idle limit)`);
        },
      ];
      if (r % 2 === 0) runs.reverse();
      await runs[0]('relay_ba', { [a]: n, [b]: 0 });
      await sleep(SETTLE_MS);
      await runs[1]('relay_ab', { [a]: 0, [b]: n });
      await sleep(SETTLE_MS);
    }
    // The rate: a backlog of six windows' worth, one round.
    const jobs = RATE * 6;
    await purgeQueues(ctx.opts.url, [a, b]);
    await fill(ctx, 'relay_b', jobs);
    const rated = withLimits(ctx, { 'bench-rate': { rate: { limit: RATE, period: 'PT1S' } } }, 'bench-rate');
    const round = await stagecoachRound({ ...ctx, config: rated }, ['relay_ba'], jobs, 'limits (rate)');
    // A sliding window lets RATE start at once, then RATE a window later, and so on: the last
    // RATE start about a window before they would be due, so the run stands for its time plus one window.
    const steady = jobs / (round.seconds + 1);
    rates.push({ ...round, side: 'stagecoach', jobsPerSecond: steady }, { ...round, side: 'baseline', jobsPerSecond: RATE });
  } finally {
    await purgeQueues(ctx.opts.url, [a, b]).catch(() => undefined);
  }
  return [
    summarise('limit-idle', 'relay with a concurrency limit never reached (stagecoach column) vs none (baseline column)', [
      ...asSide(none, 'baseline'),
      ...asSide(limited, 'stagecoach'),
    ]),
    summarise('limit-rate', `starts/s achieved after the first window under rate ${RATE} per PT1S (stagecoach column) vs the limit`, rates),
  ];
}

/** The bench configuration with named limits taken by the relay stages. */
function withLimits(ctx: BenchContext, limits: RawConfig['limits'], key: string): ReturnType<typeof compileConfig> {
  const stages = { ...ctx.raw.stages } as Record<string, NonNullable<RawConfig['stages']>[string]>;
  for (const name of ['relay_ab', 'relay_ba']) stages[name] = { ...stages[name], limits: [key] };
  return compileConfig({ ...ctx.raw, limits, stages }, ctx.source);
}
