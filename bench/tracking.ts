import type { Channel } from 'amqplib';
import { parseRecords } from '../src/tracking-stream/tracking-report.js';
import {
  alternatingRounds,
  asSide,
  closeQuietly,
  connect,
  expectCounts,
  fill,
  fmt,
  progress,
  purgeQueues,
  sleep,
  summarise,
  withTimeout,
  type BenchContext,
  type Round,
  type ThroughputResult,
} from './common.js';
import { baselineRound, physical, SETTLE_MS, stagecoachRound } from './throughput.js';

/** The batch every job of the tracked backlog belongs to. */
const BATCH = 'bench-tracking';

/**
 * Batch tracking on against off (docs/batches.md): the same relay handler, the same job size,
 * prefetch and concurrency, once with every job in a batch (so every settlement also publishes
 * its report to `<prefix>.tracking` in the confirm wait before the ack) and once without.
 * "Off" relays `relay_a` <-> `relay_b` (stages relay_ab / relay_ba), "on" relays `trk_a` <->
 * `trk_b` (stages trk_ab / trk_ba, the same handler): a batch is inherited by emitted jobs, so
 * the two backlogs cannot share queues. Each round also runs the hand-written relay on the
 * unbatched pair first, so the same run shows that unbatched jobs pay nothing for tracking:
 * baseline relay_a -> relay_b, then "off" relay_b -> relay_a; "on" moves its own backlog
 * forwards on odd rounds and backwards on even ones. The order of "on" and "off" alternates.
 *
 * @returns two rows: tracking (off in the baseline column, on in the stagecoach one; ratio
 * on / off) and the unbatched relay against the hand-written one.
 */
export async function benchTracking(ctx: BenchContext): Promise<ThroughputResult[]> {
  const n = ctx.opts.jobs;
  const [a, b] = [physical(ctx, 'relay_a'), physical(ctx, 'relay_b')];
  const [ta, tb] = [physical(ctx, 'trk_a'), physical(ctx, 'trk_b')];
  progress(`tracking: ${fmt(n)} jobs per round, relay with every job in batch "${BATCH}" vs without, prefetch ${ctx.opts.prefetch}`);
  const raw: Round[] = [];
  const off: Round[] = [];
  const on: Round[] = [];
  try {
    await fill(ctx, 'relay_a', n);
    await fill(ctx, 'trk_a', n, { meta: { batch: BATCH } });
    await alternatingRounds(ctx.opts.rounds, async (r) => {
      const forwards = r % 2 === 1;
      const runOff = async (): Promise<void> => {
        const round = await stagecoachRound(ctx, ['relay_ba'], n, `tracking round ${r} (off)`);
        await expectCounts(ctx.opts.url, { [a]: n, [b]: 0 }, `tracking round ${r} (off)`);
        off.push(round);
        await sleep(SETTLE_MS);
      };
      const runOn = async (): Promise<void> => {
        const stage = forwards ? 'trk_ab' : 'trk_ba';
        const round = await stagecoachRound(ctx, [stage], n, `tracking round ${r} (on)`);
        await expectCounts(ctx.opts.url, forwards ? { [ta]: 0, [tb]: n } : { [ta]: n, [tb]: 0 }, `tracking round ${r} (on)`);
        await expectLastReport(ctx, stage, `tracking round ${r} (on)`);
        on.push(round);
        await sleep(SETTLE_MS);
      };
      raw.push(await baselineRound(ctx, [['relay_a', 'relay_b']], n, `tracking round ${r} (hand-written)`));
      await expectCounts(ctx.opts.url, { [a]: 0, [b]: n }, `tracking round ${r} (hand-written)`);
      await sleep(SETTLE_MS);
      // Alternated, so that neither side always runs right after the hand-written round.
      return [runOff, runOn];
    });
  } finally {
    await purgeQueues(ctx.opts.url, [a, b, ta, tb]).catch(() => undefined);
  }
  return [
    summarise('tracking', `relay, every job batched (on, stagecoach column) vs no batch (off, baseline column); ratio on / off`, [
      ...asSide(off, 'baseline'),
      ...asSide(on, 'stagecoach'),
    ]),
    summarise('relay (tracking run)', `the "off" rounds above vs hand-written, same run`, [...raw, ...asSide(off, 'stagecoach')]),
  ];
}

/**
 * Proof that "on" really reported: the last record on the tracking stream is a settlement of the
 * bench batch by the stage that just ran. (Not a count: a stream's message count in the
 * management API lags by seconds.)
 */
async function expectLastReport(ctx: BenchContext, stage: string, what: string): Promise<void> {
  const connection = await connect(ctx.opts.url, 'bench-tracking-check');
  let channel: Channel | undefined;
  try {
    channel = await connection.createChannel();
    const ch = channel;
    // A stream is read by a consumer with a prefetch and an offset; `last` starts at the last chunk.
    await ch.prefetch(100);
    const last = await withTimeout(
      new Promise<Buffer>((resolve) => {
        let latest: Buffer | undefined;
        let timer: NodeJS.Timeout | undefined;
        void ch.consume(
          ctx.names.tracking,
          (message) => {
            if (message === null) return;
            latest = message.content;
            ch.ack(message);
            // The chunk arrives in one go: the last message of it is the one after which nothing came for a moment.
            clearTimeout(timer);
            timer = setTimeout(() => resolve(latest as Buffer), 200);
          },
          { arguments: { 'x-stream-offset': 'last' } },
        );
      }),
      10_000,
      `${what}: reading the tracking stream`,
    );
    const record = parseRecords(last).at(-1);
    if (record?.kind !== 'settled' || record.batch !== BATCH || record.stage !== stage || record.outcome !== 'completed') {
      throw new Error(`${what}: the last tracking record is not a completed report of ${stage}: ${last.toString('utf8').slice(0, 300)}`);
    }
  } finally {
    await closeQuietly(connection, channel);
  }
}
