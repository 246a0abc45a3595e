import type { Channel } from 'amqplib';
import { compileConfig } from '../src/config/compile-config.js';
import type { RawConfig } from '../src/config/config.types.js';
import type { StageGroupOptions } from '../src/runner/stage-group.js';
import type { Middleware } from '../src/stage/middleware/middleware.types.js';
import {
  alternatingRounds,
  closeQuietly,
  connect,
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

/** One side of a hooks scenario: how its stage group runs (options, and the configuration). */
interface Side {
  options: StageGroupOptions;
  ctx: BenchContext;
}

/**
 * The relay with something around every job ("on") against the same relay without ("off"), the
 * same backlog carried back and forth between `relay_a` and `relay_b`, the order of the two sides
 * alternating from round to round. Off is the baseline column, on the stagecoach one: the ratio
 * is on / off.
 */
async function onAgainstOff(
  ctx: BenchContext,
  scenario: string,
  detail: string,
  off: Side,
  on: Side,
  afterOn?: (rounds: number) => Promise<void>,
): Promise<ThroughputResult> {
  const n = ctx.opts.jobs;
  const [a, b] = [physical(ctx, 'relay_a'), physical(ctx, 'relay_b')];
  progress(`${scenario}: ${fmt(n)} jobs per round, ${detail}, prefetch ${ctx.opts.prefetch}`);
  const rounds: Round[] = [];
  let at: 'a' | 'b' = 'a';
  let onRounds = 0;
  try {
    await fill(ctx, 'relay_a', n);
    const run = async (side: Side, as: Round['side'], what: string): Promise<void> => {
      const stage = at === 'a' ? 'relay_ab' : 'relay_ba';
      const round = await stagecoachRound(side.ctx, [stage], n, what, side.options);
      at = at === 'a' ? 'b' : 'a';
      await expectCounts(ctx.opts.url, at === 'b' ? { [a]: 0, [b]: n } : { [a]: n, [b]: 0 }, what);
      rounds.push({ ...round, side: as });
      await sleep(SETTLE_MS);
    };
    await alternatingRounds(ctx.opts.rounds, (r) => {
      const runOn = async (): Promise<void> => {
        await run(on, 'stagecoach', `${scenario} round ${r} (on)`);
        await afterOn?.(++onRounds);
      };
      const runOff = (): Promise<void> => run(off, 'baseline', `${scenario} round ${r} (off)`);
      return [runOff, runOn];
    });
  } finally {
    await purgeQueues(ctx.opts.url, [a, b]).catch(() => undefined);
  }
  return summarise(scenario, `${detail}; ratio on / off`, rounds);
}

/** Middleware that only passes the job on: what the chains themselves cost. */
const PASS_THROUGH: Middleware = {
  execution: [(_job, _ctx, next) => next()],
  enqueue: [(_job, next) => next()],
};

/**
 * Scenario `middleware` (docs/middleware.md): the relay with one pass-through execution and one
 * enqueue middleware in its stage group against none.
 */
export function benchMiddleware(ctx: BenchContext): Promise<ThroughputResult> {
  return onAgainstOff(
    ctx,
    'middleware',
    'relay, one execution + one enqueue middleware (on, stagecoach column) vs none (off, baseline column)',
    { ctx, options: {} },
    { ctx, options: { middleware: PASS_THROUGH } },
  );
}

/**
 * Scenario `events` (docs/broker.md "Events"): the relay with `events: true` on its queues (a
 * `job.completed` event per job, after its ack) against without. A queue bound to
 * `job.completed` proves the events were published: after every "on" round it holds n more.
 */
export async function benchEvents(ctx: BenchContext): Promise<ThroughputResult> {
  const raw: RawConfig = {
    ...ctx.raw,
    queues: { ...ctx.raw.queues, relay_a: { scope: 'tenant', events: true }, relay_b: { scope: 'tenant', events: true } },
  };
  const evented: BenchContext = { ...ctx, raw, config: compileConfig(raw, ctx.source) };
  const witness = `${ctx.config.prefix}.bench-events`;
  const connection = await connect(ctx.opts.url, 'bench-events');
  let channel: Channel | undefined;
  try {
    channel = await connection.createChannel();
    await channel.assertExchange(ctx.names.events, 'topic', { durable: ctx.config.durable });
    await channel.assertQueue(witness, { durable: false });
    await channel.bindQueue(witness, ctx.names.events, 'job.completed');
    return await onAgainstOff(
      ctx,
      'events',
      'relay, job.* events on (stagecoach column) vs off (baseline column)',
      { ctx, options: {} },
      { ctx: evented, options: {} },
      (rounds) => expectCounts(ctx.opts.url, { [witness]: rounds * ctx.opts.jobs }, `events: job.completed of ${fmt(rounds)} round(s)`),
    );
  } finally {
    await channel?.deleteQueue(witness).catch(() => undefined);
    await closeQuietly(connection, channel);
  }
}
