import type { Channel, ConfirmChannel, ConsumeMessage } from 'amqplib';
import { v7 as uuidv7 } from 'uuid';
import { Publisher } from '../src/index.js';
import { routeFor } from '../src/broker/job-router.js';
import { fromWire } from '../src/wire.js';
import { BullmqPeer } from './bullmq-peer.js';
import {
  closeQuietly,
  connect,
  expectCounts,
  fmt,
  JOB_TYPE,
  median,
  progress,
  purgeQueues,
  rawJob,
  rawOptions,
  rawTraceparent,
  sleep,
  TENANT,
  withTimeout,
  type BenchContext,
  type Round,
} from './common.js';
import { peerStageName } from './peer-stages.js';
import type { Outgoing } from './raw-relay.js';
import { relaysRound, SETTLE_MS, stagecoachRound } from './throughput.js';
import { optionsOf, publishBytes } from './wire-bytes.js';

/**
 * The `peers` scenario: stagecoach against what a user would otherwise run, the same relay and
 * 3-stage pipeline each (one process, jobs of `--peer-args` bytes of args, input done only once
 * its output is durably accepted):
 * - `amqplib`: hand-written, the smallest correct message (`{id, type, args}`, persistent, no
 *   headers) published by the default exchange straight to the next queue, confirms tracked by
 *   callbacks, prefetch `--peer-prefetch`, inputs acked after their output's confirm with
 *   `allUpTo` batching (bench/raw-relay.ts): the practical floor of client work on RabbitMQ;
 * - `amqplib-c`: the same with prefetch = `--peer-concurrency`: as many jobs in flight as the
 *   stagecoach and BullMQ handlers, whose slot holds a job until its output is confirmed;
 * - `amqplib-ojs`: the same hand-written relay (prefetch `--peer-prefetch`) writing the message
 *   the OJS AMQP binding asks for (the envelope, its properties and `x-ojs-*` headers, as
 *   stagecoach writes it on a shared queue) through `ojs.direct`: what the binding's wire costs,
 *   apart from what stagecoach's client code costs;
 * - `shared`: stagecoach stages on shared queues (`ojs.direct`);
 * - `tenant`: stagecoach stages on one tenant's queues (the tenant-scoped path);
 * - `variant`: relay only, on a tenant's queue with variants (jobs matching no variant);
 * - `bullmq`: BullMQ workers on a private redis-server with AOF (bench/bullmq-peer.ts).
 * stagecoach and BullMQ run `--peer-concurrency` handlers at once. Every side drains its own
 * backlog (relay: r0 <-> r1 alternately; pipeline: a ring of 4 queues, 3 hops a round), so no
 * round refills; the sides take turns within each round, in an order rotated every round.
 */
export const PEER_SIDES = ['amqplib', 'amqplib-c', 'amqplib-ojs', 'shared', 'tenant', 'variant', 'bullmq'] as const;
export type PeerSide = (typeof PEER_SIDES)[number];

/** Each side's logical queue prefix (bench/peer-stages.ts; `xa` queues are only declared). */
const PREFIX: Record<Exclude<PeerSide, 'bullmq'>, string> = {
  amqplib: 'xa',
  'amqplib-c': 'xb',
  'amqplib-ojs': 'xo',
  shared: 'xs',
  tenant: 'xt',
  variant: 'xv',
};
/** The hand-written relays writing the smallest message, by the default exchange. */
const minimal = (side: PeerSide): side is 'amqplib' | 'amqplib-c' => side === 'amqplib' || side === 'amqplib-c';
/** The hand-written relays: plain amqplib, no stage. */
const handWritten = (side: PeerSide): side is 'amqplib' | 'amqplib-c' | 'amqplib-ojs' => minimal(side) || side === 'amqplib-ojs';

export interface PeerRow {
  side: PeerSide;
  /** Medians over the rounds. */
  jobsPerSecond: number;
  /** jobsPerSecond / the amqplib side's. */
  ratio: number;
  cpuUsPerJob: number;
  /** RabbitMQ's (beam.smp) or redis-server's CPU per job. */
  brokerCpuUsPerJob: number | undefined;
  /** One message as written: AMQP publish frames (bench/wire-bytes.ts), or the job's hash in Redis. */
  messageBytes: number | undefined;
  rounds: Round[];
}

export interface PeersResult {
  relay: PeerRow[];
  pipeline: PeerRow[];
  concurrency: number;
  prefetch: number;
  argsBytes: number;
}

let bullmq: BullmqPeer | undefined;

export async function benchPeers(ctx: BenchContext): Promise<PeersResult> {
  const { opts } = ctx;
  const args = ['x'.repeat(opts.peerArgs)];
  progress(
    `peers: ${fmt(opts.jobs)} jobs per relay round, ${fmt(opts.pipelineJobs)} per pipeline round, concurrency ${opts.peerConcurrency}, ` +
      `prefetch ${opts.peerPrefetch}, args of ${opts.peerArgs} B`,
  );
  bullmq = new BullmqPeer(ctx, `${ctx.config.prefix}-bull`);
  try {
    await bullmq.start();
    const peer = bullmq;
    const relay = await measure(ctx, 'relay', PEER_SIDES, opts.jobs, args, peer);
    const pipeline = await measure(
      ctx,
      'pipeline',
      PEER_SIDES.filter((side) => side !== 'variant'),
      opts.pipelineJobs,
      args,
      peer,
    );
    return { relay, pipeline, concurrency: opts.peerConcurrency, prefetch: opts.peerPrefetch, argsBytes: opts.peerArgs };
  } finally {
    await cleanupPeers();
  }
}

/** Stops the private redis-server (the RabbitMQ queues go with the bench's prefix). */
export async function cleanupPeers(): Promise<void> {
  await bullmq?.stop();
  bullmq = undefined;
}

type Kind = 'relay' | 'pipeline';

/** The queue holding the backlog before round `r` (1-based): relay r0 / r1 alternately, the pipeline ring 3 hops on each round. */
function holder(kind: Kind, r: number): number {
  return kind === 'relay' ? (r - 1) % 2 : (3 * (r - 1)) % 4;
}
function queueNames(kind: Kind): string[] {
  return kind === 'relay' ? ['r0', 'r1'] : ['p0', 'p1', 'p2', 'p3'];
}

async function measure(
  ctx: BenchContext,
  kind: Kind,
  sides: readonly PeerSide[],
  n: number,
  args: unknown[],
  peer: BullmqPeer,
): Promise<PeerRow[]> {
  const rounds = new Map<PeerSide, Round[]>(sides.map((side) => [side, []]));
  const bytes = new Map<PeerSide, number | undefined>();
  const local = queueNames(kind);
  const physical = (side: Exclude<PeerSide, 'bullmq'>, q: string): string =>
    side === 'shared' || handWritten(side) ? ctx.names.queue(`${PREFIX[side]}_${q}`) : ctx.names.queue(`${PREFIX[side]}_${q}`, TENANT);
  // What a hand-written relay publishes: the smallest message to the next queue by the default
  // exchange, or (amqplib-ojs) the binding's message to the logical queue through `ojs.direct`.
  const output = (side: 'amqplib' | 'amqplib-c' | 'amqplib-ojs', q: string): ((message: ConsumeMessage) => Outgoing) =>
    minimal(side) ? minimalOutput(physical(side, q)) : bindingOutput(ctx.names.direct, `${PREFIX[side]}_${q}`);
  try {
    for (const side of sides) {
      if (side === 'bullmq') await peer.fill(`${kind}-${local[0]}`, n, args);
      else if (minimal(side)) await fillRaw(ctx, physical(side, local[0] as string), n, args);
      else await fillStagecoach(ctx, `${PREFIX[side]}_${local[0]}`, side === 'tenant' || side === 'variant' ? TENANT : undefined, n, args);
    }
    progress(`  ${kind}: filled ${sides.length} backlogs of ${fmt(n)}`);
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  ${kind} round ${r}/${ctx.opts.rounds}`);
      const from = holder(kind, r);
      const to = holder(kind, r + 1);
      const order = sides.map((_, i) => sides[(i + r - 1) % sides.length] as PeerSide);
      for (const side of order) {
        const what = `peers ${kind} round ${r} (${side})`;
        const hops = (kind === 'relay' ? [from] : [from, (from + 1) % 4, (from + 2) % 4]).map((k): [string, string] => [
          local[k] as string,
          local[(k + 1) % local.length] as string,
        ]);
        const held = (count: (q: string) => string): Record<string, number> =>
          Object.fromEntries(local.map((q, k) => [count(q), k === to ? n : 0]));
        if (side === 'bullmq') {
          const named = hops.map(([i, o]): [string, string] => [`${kind}-${i}`, `${kind}-${o}`]);
          rounds.get(side)?.push(await peer.round(named, n, ctx.opts.peerConcurrency, what));
          await peer.expectWaiting(
            held((q) => `${kind}-${q}`),
            what,
          );
          if (r === ctx.opts.rounds) bytes.set(side, await peer.messageBytes(`${kind}-${local[to]}`));
        } else {
          if (handWritten(side)) {
            const relays = hops.map(([i, o]) => ({ input: physical(side, i), output: output(side, o) }));
            const prefetch = side === 'amqplib-c' ? ctx.opts.peerConcurrency : ctx.opts.peerPrefetch;
            rounds.get(side)?.push(await relaysRound(ctx, relays, prefetch, n, what, side));
          } else {
            const stages = hops.map(([i]) =>
              kind === 'relay'
                ? peerStageName.relay(PREFIX[side], Number(i.slice(1)) as 0 | 1)
                : peerStageName.pipe(PREFIX[side], Number(i.slice(1))),
            );
            rounds.get(side)?.push(await stagecoachRound(ctx, stages, n, what, {}, side));
          }
          await expectCounts(
            ctx.opts.url,
            held((q) => physical(side, q)),
            what,
          );
          if (r === ctx.opts.rounds) bytes.set(side, await peekBytes(ctx, side, physical(side, local[to] as string)));
        }
        await sleep(SETTLE_MS);
      }
    }
  } finally {
    const rabbit = sides.filter((side): side is Exclude<PeerSide, 'bullmq'> => side !== 'bullmq');
    await purgeQueues(
      ctx.opts.url,
      rabbit.flatMap((side) => local.map((q) => physical(side, q))),
    ).catch(() => undefined);
  }
  const base = median((rounds.get('amqplib') ?? []).map((r) => r.jobsPerSecond));
  return sides.map((side) => {
    const of = rounds.get(side) ?? [];
    const jobsPerSecond = median(of.map((r) => r.jobsPerSecond));
    const broker = of.every((r) => r.brokerCpuUsPerJob !== undefined) ? median(of.map((r) => r.brokerCpuUsPerJob as number)) : undefined;
    return {
      side,
      jobsPerSecond,
      ratio: jobsPerSecond / base,
      cpuUsPerJob: median(of.map((r) => r.cpuUsPerJob)),
      brokerCpuUsPerJob: broker,
      messageBytes: bytes.get(side),
      rounds: of,
    };
  });
}

/** The smallest correct job: its id, type and args, persistent, by the default exchange to the queue. */
function minimalJob(type: string, args: unknown): Buffer {
  return Buffer.from(JSON.stringify({ id: uuidv7(), type, args }));
}

/**
 * The binding's message for the next queue, written by hand: the envelope (`meta.parent_id` the
 * input's id, as `ctx.emit` sets it), its properties and the `x-ojs-*` headers stagecoach writes
 * for a shared queue (queue, attempt, a traceparent continuing the input's trace).
 */
function bindingOutput(exchange: string, queue: string): (message: ConsumeMessage) => Outgoing {
  return (message) => {
    const input = JSON.parse(message.content.toString('utf8')) as { id: string; type: string; args: unknown[] };
    const job = { ...rawJob(queue, input.type, input.args, input.id), tenant: undefined };
    const options = rawOptions(job, rawTraceparent(message.properties.headers?.['x-ojs-traceparent']));
    return { exchange, routingKey: queue, content: Buffer.from(JSON.stringify(job)), options };
  };
}

function minimalOutput(queue: string): (message: ConsumeMessage) => Outgoing {
  return (message) => {
    const job = JSON.parse(message.content.toString('utf8')) as { type: string; args: unknown[] };
    return { exchange: '', routingKey: queue, content: minimalJob(job.type, job.args), options: { persistent: true } };
  };
}

async function fillRaw(ctx: BenchContext, queue: string, n: number, args: unknown[]): Promise<void> {
  const connection = await connect(ctx.opts.url, 'bench-filler');
  let channel: ConfirmChannel | undefined;
  try {
    channel = await connection.createConfirmChannel();
    for (let sent = 0; sent < n; sent++) {
      if (!channel.publish('', queue, minimalJob(JOB_TYPE, args), { persistent: true }))
        await new Promise((r) => channel?.once('drain', r));
    }
    await withTimeout(channel.waitForConfirms(), 120_000, `filling ${queue}`);
  } finally {
    await closeQuietly(connection, channel);
  }
}

/** Fills with stagecoach's own `Publisher`, `meta.parent_id` included, as the relayed jobs carry. */
async function fillStagecoach(ctx: BenchContext, queue: string, tenant: string | undefined, n: number, args: unknown[]): Promise<void> {
  const publisher = await Publisher.connect(ctx.config, { log: ctx.log });
  try {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < n) {
        next++;
        await publisher.publish(queue, {
          type: JOB_TYPE,
          args,
          meta: { parent_id: uuidv7() },
          ...(tenant === undefined ? {} : { tenant }),
        });
      }
    };
    await withTimeout(Promise.all(Array.from({ length: 200 }, worker)), 120_000, `filling ${queue}`);
  } finally {
    await publisher.close().catch(() => undefined);
  }
}

/**
 * The wire bytes of one message waiting in `queue`, published as its side publishes it: the
 * default exchange for amqplib, stagecoach's route otherwise. Read after the last round only: the
 * message goes back flagged `redelivered`, which a stage takes for a crash (suspect queue).
 */
async function peekBytes(ctx: BenchContext, side: Exclude<PeerSide, 'bullmq'>, queue: string): Promise<number | undefined> {
  const connection = await connect(ctx.opts.url, 'bench-peek');
  let channel: Channel | undefined;
  try {
    channel = await connection.createChannel();
    const message = await channel.get(queue, { noAck: false });
    if (message === false) return undefined;
    channel.nack(message, false, true);
    const options = optionsOf(message.properties);
    if (minimal(side)) return publishBytes('', queue, message.content, options);
    const { job, headers } = fromWire(message, ctx.config.tenantHeader);
    const route = routeFor(ctx.config, job, { now: Date.now(), headers });
    return publishBytes(route.exchange, route.routingKey, message.content, options);
  } finally {
    await closeQuietly(connection, channel);
  }
}

/** The peers tables. */
export function renderPeers(result: PeersResult): string[] {
  const lines: string[] = [];
  for (const [kind, rows] of [
    ['relay', result.relay],
    ['pipeline (3 hops)', result.pipeline],
  ] as const) {
    lines.push('');
    const table = [['peers: ' + kind, 'jobs/s', 'ratio to amqplib', 'client CPU µs/job', 'broker CPU µs/job', 'message bytes']];
    for (const row of rows) {
      table.push([
        row.side,
        fmt(row.jobsPerSecond),
        row.ratio.toFixed(2),
        row.cpuUsPerJob.toFixed(0),
        row.brokerCpuUsPerJob === undefined ? '-' : row.brokerCpuUsPerJob.toFixed(0),
        row.messageBytes === undefined ? '-' : String(row.messageBytes),
      ]);
    }
    const widths = (table[0] as string[]).map((_, i) => Math.max(...table.map((row) => (row[i] ?? '').length)));
    const line = (row: string[]): string =>
      row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] as number) : cell.padStart(widths[i] as number))).join('  ');
    lines.push(line(table[0] as string[]), widths.map((w) => '-'.repeat(w)).join('  '), ...table.slice(1).map(line));
  }
  const rate = (rows: PeerRow[], side: PeerSide): number => rows.find((row) => row.side === side)?.jobsPerSecond ?? Number.NaN;
  const targets: Array<[string, number, number]> = [
    ['stagecoach relay (shared) / amqplib', rate(result.relay, 'shared') / rate(result.relay, 'amqplib'), 0.95],
    ['tenant-scoped relay / shared relay', rate(result.relay, 'tenant') / rate(result.relay, 'shared'), 0.9],
    ['stagecoach pipeline (shared) / amqplib', rate(result.pipeline, 'shared') / rate(result.pipeline, 'amqplib'), 0.9],
    ['stagecoach pipeline (tenant) / amqplib', rate(result.pipeline, 'tenant') / rate(result.pipeline, 'amqplib'), 0.9],
  ];
  lines.push('');
  for (const [what, value, target] of targets)
    lines.push(`${value >= target ? 'target met    ' : 'target MISSED '} ${what}: ${value.toFixed(2)} (>= ${target})`);
  // Not targets: what the binding's message costs a hand-written relay, and stagecoach beside that.
  const ratio = (rows: PeerRow[], side: PeerSide, base: PeerSide): string => (rate(rows, side) / rate(rows, base)).toFixed(2);
  lines.push(
    `the binding's message: amqplib-ojs / amqplib ${ratio(result.relay, 'amqplib-ojs', 'amqplib')} (relay), ` +
      `${ratio(result.pipeline, 'amqplib-ojs', 'amqplib')} (pipeline); stagecoach shared / amqplib-ojs ` +
      `${ratio(result.relay, 'shared', 'amqplib-ojs')} (relay), ${ratio(result.pipeline, 'shared', 'amqplib-ojs')} (pipeline)`,
  );
  lines.push(
    `(concurrency ${result.concurrency} for stagecoach and BullMQ, prefetch ${result.prefetch} for amqplib, amqplib-ojs and stagecoach, ${result.concurrency} for amqplib-c, args of ${result.argsBytes} B; ` +
      'broker CPU: RabbitMQ beam.smp, redis-server for bullmq; message bytes: AMQP publish frames, or the job hash in Redis)',
  );
  return lines;
}
