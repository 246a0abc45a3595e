import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import { Publisher, StageGroup, type StageGroupOptions } from '../src/index.js';
import { queueFor } from '../src/config/queue-resolver.js';
import { probe } from './bench-stages.js';
import {
  bodySize,
  closeQuietly,
  connect,
  markNow,
  expectCounts,
  fill,
  fmt,
  JOB_TYPE,
  padFor,
  progress,
  purgeQueues,
  rawJob,
  rawOptions,
  rawTraceparent,
  round,
  sleep,
  summarise,
  TENANT,
  withTimeout,
  waitDone,
  type BenchContext,
  type Round,
  type ThroughputResult,
} from './common.js';
import { ojsOutput, RawRelay, type Outgoing } from './raw-relay.js';

/** Pause between rounds, so that one round's disk writes do not land in the next one. */
export const SETTLE_MS = 500;

/** A logical queue's physical name for the bench tenant. */
export function physical(ctx: BenchContext, queue: string): string {
  return ctx.names.queue(queue, TENANT);
}

/**
 * Hand-written relays on one connection (as `StageGroup` runs its stages on one): each hop
 * drains its input and publishes to the next logical queue through the tenant root exchange.
 * Timed from the first delivery of the first hop until the last hop has acknowledged `n`.
 */
export function baselineRound(ctx: BenchContext, hops: Array<[string, string]>, n: number, what: string): Promise<Round> {
  return relaysRound(
    ctx,
    hops.map(([input, output]) => ({ input: physical(ctx, input), output: ojsOutput(ctx.names.root, output) })),
    ctx.opts.prefetch,
    n,
    what,
  );
}

/** Hand-written relays on one connection, each draining its input into its output; timed as {@link baselineRound}. */
export async function relaysRound(
  ctx: BenchContext,
  hops: Array<{ input: string; output: (message: ConsumeMessage) => Outgoing }>,
  prefetch: number,
  n: number,
  what: string,
  side = 'baseline',
): Promise<Round> {
  const connection = await connect(ctx.opts.url, 'bench-baseline');
  const relays = hops.map(({ input, output }) => new RawRelay(connection, input, output, prefetch));
  try {
    // Last hop first: every hop consumes before the first one starts draining the backlog.
    for (const relay of [...relays].reverse()) await relay.start();
    const last = relays[relays.length - 1] as RawRelay;
    const end = await waitDone(ctx, what, n, () => last.acked, Promise.race(relays.map((r) => r.failed)));
    const first = relays[0] as RawRelay;
    return round(side, n, { at: first.first, cpu: first.firstCpu, broker: first.firstBroker }, end);
  } finally {
    for (const relay of relays) await withTimeout(relay.stop(), 30_000, `${what}: stopping`).catch(() => undefined);
    await closeQuietly(connection);
  }
}

/**
 * The same hops as stagecoach stages, in one `StageGroup` (one connection, like `dev`).
 * Timed from the first handle() of the first stage until the last stage has completed `n`
 * (completed = every emit confirmed and the input acknowledged). `prepare` may change the group
 * before it starts (bench/payloads.ts takes its payload offloader away).
 */
export async function stagecoachRound(
  ctx: BenchContext,
  stageNames: string[],
  n: number,
  what: string,
  options: StageGroupOptions = {},
  side = 'stagecoach',
): Promise<Round> {
  probe.reset();
  // Last stage first (StageGroup starts its runners in order, each declaring its topology):
  // every stage consumes before the first one starts draining the backlog.
  const instances = [...stageNames].reverse().map((name) => {
    const stage = ctx.stages.get(name);
    if (!stage) throw new Error(`bench stage ${name} not loaded`);
    // A stage of a shared queue serves every tenant: it runs without one.
    return queueFor(ctx.config, stage.metadata.input).scope === 'shared' ? { stage } : { stage, tenant: TENANT };
  });
  const group = new StageGroup(ctx.config, instances, ctx.log, options);
  try {
    await withTimeout(group.start(false), 60_000, `${what}: starting the stages`);
    const last = group.runners[0];
    if (!last) throw new Error(`${what}: the stage group has no runners`);
    const end = await waitDone(ctx, what, n, () => last.stats.completed, group.failed);
    const start = probe.first.get(stageNames[0] as string);
    if (start === undefined) throw new Error(`${what}: the first stage never ran`);
    const stats = group.runners.map((r) => r.stats);
    if (stats.some((s) => s.deadLettered + s.retried + s.discarded > 0)) {
      throw new Error(`${what}: jobs failed in the stage: ${JSON.stringify(stats)}`);
    }
    return round(side, n, start, end);
  } finally {
    await withTimeout(group.stop(), 60_000, `${what}: stopping the stages`).catch((err: Error) => progress(`  warning: ${err.message}`));
  }
}

/**
 * Stage relay vs hand-written relay, one hop through the root exchange. The backlog is
 * filled once; each round drains one queue into the other (baseline relay_a -> relay_b,
 * stagecoach relay_b -> relay_a), so no refill is needed between rounds and both sides always
 * drain an identical backlog of `jobs` jobs of the same size.
 */
export async function benchRelay(ctx: BenchContext): Promise<ThroughputResult> {
  const n = ctx.opts.jobs;
  const a = physical(ctx, 'relay_a');
  const b = physical(ctx, 'relay_b');
  progress(`relay: ${fmt(n)} jobs per round, prefetch ${ctx.opts.prefetch}, ${bodySize(ctx.opts.size)} B bodies`);
  const rounds: Round[] = [];
  try {
    await fill(ctx, 'relay_a', n);
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
      rounds.push(await baselineRound(ctx, [['relay_a', 'relay_b']], n, `relay round ${r} (baseline)`));
      await expectCounts(ctx.opts.url, { [a]: 0, [b]: n }, `relay round ${r} (baseline)`);
      await sleep(SETTLE_MS);
      rounds.push(await stagecoachRound(ctx, ['relay_ba'], n, `relay round ${r} (stagecoach)`));
      await expectCounts(ctx.opts.url, { [a]: n, [b]: 0 }, `relay round ${r} (stagecoach)`);
      await sleep(SETTLE_MS);
    }
  } finally {
    await purgeQueues(ctx.opts.url, [a, b]).catch(() => undefined);
  }
  return summarise('relay', `1 hop via root exchange, prefetch ${ctx.opts.prefetch}`, rounds);
}

/**
 * The example pipeline's shape: three tenant-scoped hops through the root exchange, all three
 * stages in one process. The queues p_0 .. p_5 form a ring: the backlog is filled once in p_0;
 * the hand-written pipeline moves it p_0 -> p_1 -> p_2 -> p_3, the stagecoach one
 * p_3 -> p_4 -> p_5 -> p_0 (stages pipe1..pipe3), so both always drain `pipelineJobs` jobs of
 * the same size through the same kind of queues, and no round needs a refill.
 * Timed from the first delivery of the first hop until the third hop has acknowledged all.
 */
export async function benchPipeline(ctx: BenchContext): Promise<ThroughputResult> {
  const n = ctx.opts.pipelineJobs;
  const queues = [0, 1, 2, 3, 4, 5].map((i) => physical(ctx, `p_${i}`));
  const holding = (i: number): Record<string, number> => Object.fromEntries(queues.map((q, j) => [q, j === i ? n : 0]));
  progress(`pipeline: ${fmt(n)} jobs per round, 3 hops, prefetch ${ctx.opts.prefetch}`);
  const rounds: Round[] = [];
  const hops: Array<[string, string]> = [
    ['p_0', 'p_1'],
    ['p_1', 'p_2'],
    ['p_2', 'p_3'],
  ];
  try {
    await fill(ctx, 'p_0', n);
    await sleep(SETTLE_MS);
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
      rounds.push(await baselineRound(ctx, hops, n, `pipeline round ${r} (baseline)`));
      await expectCounts(ctx.opts.url, holding(3), `pipeline round ${r} (baseline)`);
      await sleep(SETTLE_MS);
      rounds.push(await stagecoachRound(ctx, ['pipe1', 'pipe2', 'pipe3'], n, `pipeline round ${r} (stagecoach)`));
      await expectCounts(ctx.opts.url, holding(0), `pipeline round ${r} (stagecoach)`);
      await sleep(SETTLE_MS);
    }
  } finally {
    await purgeQueues(ctx.opts.url, queues).catch(() => undefined);
  }
  return summarise('pipeline', `3 hops via root exchange, one process`, rounds);
}

/**
 * Publishing `jobs` jobs to a tenant queue through the root exchange, `window` confirms
 * outstanding: `Publisher.publish()` (window async loops awaiting each publish) against a
 * confirm channel with callbacks that publish the next job as each confirm arrives.
 */
export async function benchPublish(ctx: BenchContext): Promise<ThroughputResult> {
  const n = ctx.opts.jobs;
  const window = Math.min(ctx.opts.window, n);
  const sink = physical(ctx, 'pub_sink');
  progress(`publish: ${fmt(n)} jobs per round, ${window} confirms outstanding`);
  const rounds: Round[] = [];
  try {
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
      for (const side of ['baseline', 'stagecoach'] as const) {
        const what = `publish round ${r} (${side})`;
        rounds.push(side === 'baseline' ? await baselinePublish(ctx, n, window, what) : await stagecoachPublish(ctx, n, window, what));
        await expectCounts(ctx.opts.url, { [sink]: n }, what);
        await purgeQueues(ctx.opts.url, [sink]);
        await sleep(SETTLE_MS);
      }
    }
  } finally {
    await purgeQueues(ctx.opts.url, [sink]).catch(() => undefined);
  }
  return summarise('publish', `window ${window}, via root exchange`, rounds);
}

async function baselinePublish(ctx: BenchContext, n: number, window: number, what: string): Promise<Round> {
  const connection = await connect(ctx.opts.url, 'bench-baseline-publisher');
  let channel: ConfirmChannel | undefined;
  try {
    channel = await connection.createConfirmChannel();
    const ch = channel;
    const args = [padFor(ctx.opts.size, 'pub_sink', false)];
    const start = markNow();
    await withTimeout(
      new Promise<void>((resolve, reject) => {
        let sent = 0;
        let confirmed = 0;
        const sendOne = (): void => {
          sent++;
          const job = rawJob('pub_sink', JOB_TYPE, args);
          ch.publish(
            ctx.names.root,
            'pub_sink',
            Buffer.from(JSON.stringify(job)),
            rawOptions(job, rawTraceparent(undefined)),
            (err: unknown) => {
              if (err) return reject(new Error(`${what}: broker nacked a job`));
              confirmed++;
              if (confirmed === n) resolve();
              else if (sent < n) sendOne();
            },
          );
        };
        for (let i = 0; i < window; i++) sendOne();
      }),
      ctx.opts.roundTimeoutMs,
      `${what} stalled`,
    );
    return round('baseline', n, start, markNow());
  } finally {
    await closeQuietly(connection, channel);
  }
}

async function stagecoachPublish(ctx: BenchContext, n: number, window: number, what: string): Promise<Round> {
  const publisher = await Publisher.connect(ctx.config, { log: ctx.log });
  try {
    const args = [padFor(ctx.opts.size, 'pub_sink', false)];
    let next = 0;
    const start = markNow();
    const worker = async (): Promise<void> => {
      while (next < n) {
        next++;
        await publisher.publish('pub_sink', { type: JOB_TYPE, args, tenant: TENANT });
      }
    };
    await withTimeout(Promise.all(Array.from({ length: window }, worker)), ctx.opts.roundTimeoutMs, `${what} stalled`);
    return round('stagecoach', n, start, markNow());
  } finally {
    await publisher.close().catch(() => undefined);
  }
}

/**
 * Classic against quorum queues, both relayed by stagecoach (`relay_*` stages on classic queues
 * in the "baseline" column, `qrelay_*` on quorum queues in the "stagecoach" column; the ratio is
 * quorum / classic). Both backlogs are filled once; each round drains one queue of each pair into
 * the other, forwards on odd rounds and backwards on even ones. On a single node a quorum queue
 * has one member (the cost of its Raft log and fsync); against a node of a cluster
 * (`--url`, e.g. scripts/cluster.sh) it has one per node, and the replication is measured too.
 */
export async function benchQueueTypes(ctx: BenchContext): Promise<ThroughputResult> {
  const n = ctx.opts.jobs;
  const classic = [physical(ctx, 'relay_a'), physical(ctx, 'relay_b')] as const;
  const quorum = [physical(ctx, 'qrelay_a'), physical(ctx, 'qrelay_b')] as const;
  progress(`quorum: ${fmt(n)} jobs per round, stagecoach relay on classic vs quorum queues, prefetch ${ctx.opts.prefetch}`);
  const rounds: Round[] = [];
  try {
    await fill(ctx, 'relay_a', n);
    await fill(ctx, 'qrelay_a', n);
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
      const forwards = r % 2 === 1;
      const held = (pair: readonly [string, string]) => (forwards ? { [pair[0]]: 0, [pair[1]]: n } : { [pair[0]]: n, [pair[1]]: 0 });
      const onClassic = await stagecoachRound(ctx, [forwards ? 'relay_ab' : 'relay_ba'], n, `quorum round ${r} (classic)`);
      rounds.push({ ...onClassic, side: 'baseline' });
      await expectCounts(ctx.opts.url, held(classic), `quorum round ${r} (classic)`);
      await sleep(SETTLE_MS);
      rounds.push(await stagecoachRound(ctx, [forwards ? 'qrelay_ab' : 'qrelay_ba'], n, `quorum round ${r} (quorum)`));
      await expectCounts(ctx.opts.url, held(quorum), `quorum round ${r} (quorum)`);
      await sleep(SETTLE_MS);
    }
  } finally {
    await purgeQueues(ctx.opts.url, [...classic, ...quorum]).catch(() => undefined);
  }
  return summarise(
    'quorum',
    'stagecoach relay: classic (baseline column) vs quorum queues (stagecoach column); ratio quorum / classic',
    rounds,
  );
}
