import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { createJob, createPayloadStore, Publisher, type PayloadStore } from '../src/index.js';
import { toWire } from '../src/wire.js';
import { vhostOfAmqpUrl } from '../src/security/broker-users.js';
import {
  expectCounts,
  fill,
  fmt,
  JOB_TYPE,
  median,
  poll,
  progress,
  purgeQueues,
  sleep,
  summarise,
  TENANT,
  type BenchContext,
  type Round,
  type ThroughputResult,
} from './common.js';
import { physical, SETTLE_MS, stagecoachRound } from './throughput.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;
/** Publishes outstanding while a large backlog is filled (a MiB each). */
const FILL_WINDOW = 8;
/** A large-job fill fails once no publish has completed for this long, ms. */
const FILL_STALL_MS = 60_000;
/** Memory readings per point, `READING_GAP_MS` apart; the median is kept. */
const READINGS = 3;
const READING_GAP_MS = 2000;
/** Wait before reading the node's memory after a fill: the management API samples every 5 s. */
const MEMORY_SETTLE_MS = 6000;

/** The broker node's memory, bytes; a source that did not answer is absent. */
export interface NodeMemory {
  /** Management API, `GET /api/nodes` -> `mem_used` (what the memory alarm compares with the watermark). */
  memUsed?: number;
  /** `rabbitmqctl status`: the Erlang VM's own use (`erlang:memory(total)`) and its `binary` category (message bodies). */
  erlang?: number;
  binary?: number;
}

/** One queue as the broker holds it (`rabbitmqctl list_queues`, else the management API). */
export interface QueueMemory {
  messages: number;
  /** Bytes of the message bodies, and of those in RAM. */
  messageBytes: number;
  messageBytesRam: number;
  /** The queue process's own memory (bodies are reference-counted binaries outside it). */
  memory: number;
}

export interface PayloadsResult {
  /** offloaded (stagecoach column) / inline (baseline column), the large jobs. */
  large: ThroughputResult;
  /** store configured (stagecoach column) / no offloader (baseline column), small jobs. */
  small: ThroughputResult;
  store: string;
  jobs: number;
  /** The encoded size of a large job sent inline, bytes. */
  messageBytes: number;
  /** The node with nothing of ours waiting, with the offloaded backlog alone, then with the inline one too, and at the end. */
  node: { empty: NodeMemory; offloaded: NodeMemory; inline: NodeMemory; after: NodeMemory };
  /** Each backlog's queue after every round (where the round moved it), and the median. */
  queues: { inline: QueueMemory[]; offloaded: QueueMemory[]; inlineMedian: QueueMemory; offloadedMedian: QueueMemory };
  /** Payloads in the store after each offloaded round (always `jobs`: the consumed ones deleted) and after the drain (0). */
  storeAfterRounds: number[];
  storeAfterDrain: number;
  /** How long the drain of the offloaded backlog took to empty the store after its last job completed. */
  drainDeleteSeconds: number;
}

/**
 * Payload offloading (docs/payloads.md), two parts in one run:
 *
 * - **Large jobs:** two backlogs of `--payload-jobs` jobs whose args are `--payload-size` bytes
 *   (default 1 MiB, so the message is just above the default 1 MiB threshold): one relayed inline
 *   (`pl_inline_a` <-> `pl_inline_b`, `payload_threshold` 8 MiB, the maximum) and one offloaded
 *   (`pl_off_a` <-> `pl_off_b`, the default threshold: each hop loads the args from the store,
 *   stores the emitted job's, and deletes the consumed one's after the ack). Same handler,
 *   prefetch and concurrency (`--payload-prefetch`); forwards on odd rounds, backwards on even
 *   ones; inline first on odd rounds, offloaded first on even ones. After every round: both
 *   queues' counts, the moved backlog's bytes on the broker (inline: the whole args; offloaded: a
 *   reference), and for the offloaded side a store holding exactly the backlog's payloads (every
 *   consumed one deleted). Before the rounds the broker's memory is read with nothing waiting,
 *   with the offloaded backlog alone, then with the inline one too. At the end a stage with no
 *   outputs drains the offloaded backlog: the store must be empty.
 * - **Small jobs:** the relay (`relay_a` <-> `relay_b`, `--size`, `--prefetch`, `--jobs`) with
 *   the payload store configured (every emit compares its length with the threshold, every ack
 *   looks for a reference header) against the same group with its offloader taken away (what a
 *   group was before offloading). The order alternates.
 */
export async function benchPayloads(ctx: BenchContext): Promise<PayloadsResult> {
  const n = ctx.opts.payloadJobs;
  const store = createPayloadStore(ctx.config);
  const storeName =
    ctx.config.payloads.store.kind === 'fs' ? `fs ${ctx.config.payloads.store.dir}` : `postgres table ${ctx.config.payloads.store.table}`;
  const inl = [physical(ctx, 'pl_inline_a'), physical(ctx, 'pl_inline_b')] as const;
  const off = [physical(ctx, 'pl_off_a'), physical(ctx, 'pl_off_b')] as const;
  const [a, b] = [physical(ctx, 'relay_a'), physical(ctx, 'relay_b')];
  const probe = new BrokerProbe(ctx);
  await probe.detect();
  const messageBytes = largeMessageBytes(ctx);
  progress(
    `payloads: ${fmt(n)} jobs of ${fmt(messageBytes)} B per side and round (inline vs offloaded, store ${storeName}), prefetch ${ctx.opts.payloadPrefetch}; ` +
      `then ${fmt(ctx.opts.jobs)} small jobs with and without an offloader; broker memory from ${probe.sources.join(', ')}`,
  );
  const inlineRounds: Round[] = [];
  const offRounds: Round[] = [];
  const withRounds: Round[] = [];
  const withoutRounds: Round[] = [];
  const inlineQueues: QueueMemory[] = [];
  const offQueues: QueueMemory[] = [];
  const storeAfterRounds: number[] = [];
  try {
    // Broker memory: nothing waiting, the offloaded backlog alone, then the inline one too.
    const empty = await probe.node();
    progress(`  broker memory, nothing of ours waiting: ${showNode(empty)}`);
    await fillLarge(ctx, 'pl_off_a', n);
    await expectCounts(ctx.opts.url, { [off[0]]: n }, 'payloads: filling the offloaded backlog');
    await sleep(MEMORY_SETTLE_MS);
    const offloaded = await probe.node();
    progress(`  broker memory, ${fmt(n)} offloaded jobs waiting: ${showNode(offloaded)}`);
    await fillLarge(ctx, 'pl_inline_a', n);
    await expectCounts(ctx.opts.url, { [inl[0]]: n }, 'payloads: filling the inline backlog');
    await sleep(MEMORY_SETTLE_MS);
    const inline = await probe.node();
    progress(`  broker memory, and ${fmt(n)} inline jobs waiting: ${showNode(inline)}`);
    await expectStore(store, n, 'payloads: after filling');

    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds} (large jobs)`);
      const forwards = r % 2 === 1;
      const held = (pair: readonly [string, string]): Record<string, number> =>
        forwards ? { [pair[0]]: 0, [pair[1]]: n } : { [pair[0]]: n, [pair[1]]: 0 };
      const runInline = async (): Promise<void> => {
        const what = `payloads round ${r} (inline)`;
        progress(`    inline:`);
        const round = await stagecoachRound(ctx, [forwards ? 'pl_inline_ab' : 'pl_inline_ba'], n, what);
        await expectCounts(ctx.opts.url, held(inl), what);
        const queue = await probe.queue(forwards ? inl[1] : inl[0]);
        if (queue.messageBytes < n * ctx.opts.payloadSize)
          throw new Error(`${what}: the backlog holds ${fmt(queue.messageBytes)} B: not inline`);
        progress(`      inline backlog on the broker: ${showQueue(queue)}`);
        inlineQueues.push(queue);
        inlineRounds.push({ ...round, side: 'baseline' });
        await sleep(SETTLE_MS);
      };
      const runOffloaded = async (): Promise<void> => {
        const what = `payloads round ${r} (offloaded)`;
        progress(`    offloaded:`);
        const round = await stagecoachRound(ctx, [forwards ? 'pl_off_ab' : 'pl_off_ba'], n, what);
        await expectCounts(ctx.opts.url, held(off), what);
        // The consumed payloads are deleted after each ack, in the background: only the new backlog's stay.
        storeAfterRounds.push(await expectStore(store, n, what));
        const queue = await probe.queue(forwards ? off[1] : off[0]);
        if (queue.messageBytes > n * 4096) throw new Error(`${what}: the backlog holds ${fmt(queue.messageBytes)} B: not offloaded`);
        progress(`      offloaded backlog on the broker: ${showQueue(queue)}; ${fmt(n)} payloads in the store`);
        offQueues.push(queue);
        offRounds.push(round);
        await sleep(SETTLE_MS);
      };
      if (forwards) {
        await runInline();
        await runOffloaded();
      } else {
        await runOffloaded();
        await runInline();
      }
    }
    // Every job of the offloaded backlog completes without an emit: the store must end empty.
    const last = ctx.opts.rounds % 2 === 1 ? 'b' : 'a';
    await stagecoachRound(ctx, [`pl_drain_${last}`], n, 'payloads: draining the offloaded backlog');
    const drained = performance.now();
    await expectCounts(ctx.opts.url, { [off[0]]: 0, [off[1]]: 0 }, 'payloads: draining the offloaded backlog');
    const storeAfterDrain = await expectStore(store, 0, 'payloads: after draining the offloaded backlog');
    const drainDeleteSeconds = (performance.now() - drained) / 1000;
    progress(`  drained the offloaded backlog: the store is empty`);
    await purgeQueues(ctx.opts.url, [...inl]);

    // Small jobs: store configured against no offloader, order alternated.
    const small = ctx.opts.jobs;
    progress(
      `  small jobs: ${fmt(small)} jobs per round, prefetch ${ctx.opts.prefetch}, with the store configured vs without an offloader`,
    );
    await fill(ctx, 'relay_a', small);
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds} (small jobs)`);
      const forwards = r % 2 === 1;
      const sides: Array<'with' | 'without'> = forwards ? ['with', 'without'] : ['without', 'with'];
      for (const [i, side] of sides.entries()) {
        // The first side of a round moves relay_a -> relay_b, the second moves it back.
        const there = i === 0;
        const what = `payloads round ${r} (small jobs, ${side === 'with' ? 'store configured' : 'no offloader'})`;
        progress(`    ${side === 'with' ? 'store configured' : 'no offloader'}:`);
        const round = await stagecoachRound(
          ctx,
          [there ? 'relay_ab' : 'relay_ba'],
          small,
          what,
          side === 'without' ? { payloads: false } : {},
        );
        await expectCounts(ctx.opts.url, there ? { [a]: 0, [b]: small } : { [a]: small, [b]: 0 }, what);
        (side === 'with' ? withRounds : withoutRounds).push(round);
        await sleep(SETTLE_MS);
      }
    }
    await expectStore(store, 0, 'payloads: after the small jobs (none offloaded)');
    await purgeQueues(ctx.opts.url, [a, b]);
    await sleep(MEMORY_SETTLE_MS);
    const after = await probe.node();
    progress(`  broker memory at the end, nothing of ours waiting: ${showNode(after)}`);

    const side = (rounds: Round[], as: Round['side']): Round[] => rounds.map((round) => ({ ...round, side: as }));
    return {
      large: summarise(
        'payloads, large',
        `relay of ${fmt(n)} x ${(messageBytes / MiB).toFixed(2)} MiB jobs, prefetch ${ctx.opts.payloadPrefetch}: inline (baseline column) vs offloaded to ${ctx.config.payloads.store.kind} (stagecoach column); ratio offloaded / inline`,
        [...side(inlineRounds, 'baseline'), ...side(offRounds, 'stagecoach')],
      ),
      small: summarise(
        'payloads, small',
        `relay of ${ctx.opts.size} B jobs: no offloader (baseline column) vs store configured, 1 MiB threshold (stagecoach column)`,
        [...side(withoutRounds, 'baseline'), ...side(withRounds, 'stagecoach')],
      ),
      store: storeName,
      jobs: n,
      messageBytes,
      node: { empty, offloaded, inline, after },
      queues: {
        inline: inlineQueues,
        offloaded: offQueues,
        inlineMedian: medianQueue(inlineQueues),
        offloadedMedian: medianQueue(offQueues),
      },
      storeAfterRounds,
      storeAfterDrain,
      drainDeleteSeconds,
    };
  } finally {
    await purgeQueues(ctx.opts.url, [...inl, ...off, a, b]).catch(() => undefined);
    await store.close().catch(() => undefined);
    await cleanupPayloadStore(ctx);
  }
}

/** Deletes the bench's payload store: its temporary directory, or its table. Idempotent. */
export async function cleanupPayloadStore(ctx: BenchContext): Promise<void> {
  const store = ctx.config.payloads.store;
  if (store.kind === 'fs') {
    await rm(store.dir, { recursive: true, force: true });
    return;
  }
  const client = new pg.Client({ connectionString: store.url });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(`DROP TABLE IF EXISTS ${store.table}`);
  } catch (err) {
    progress(`bench: could not drop the payload table ${store.table} (${(err as Error).message}); drop it by hand`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The encoded size of a large job inline (what the threshold compares). */
function largeMessageBytes(ctx: BenchContext): number {
  const job = createJob({ type: JOB_TYPE, args: ['x'.repeat(ctx.opts.payloadSize)] }, { queue: 'pl_inline_a', tenant: TENANT });
  return toWire(job, { tenantHeader: ctx.config.tenantHeader }).content.length;
}

/** Publishes `n` large jobs to `queue` with a `Publisher` (offloaded or not by the queue's threshold). */
async function fillLarge(ctx: BenchContext, queue: string, n: number): Promise<void> {
  const started = performance.now();
  const publisher = await Publisher.connect(ctx.config, { log: ctx.log });
  try {
    const args = ['x'.repeat(ctx.opts.payloadSize)];
    let next = 0;
    let done = 0;
    let progressed = performance.now();
    const worker = async (): Promise<void> => {
      while (next < n) {
        next++;
        await publisher.publish(queue, { type: JOB_TYPE, args, tenant: TENANT });
        done++;
        progressed = performance.now();
      }
    };
    // Bounded by progress, not in all: each offloaded job's payload is written and fsynced before
    // its publish, and a disk still busy with the broker's writes of an earlier scenario (peers)
    // makes that slow (261 of 300 in 90 s seen), not stuck. A fill that stops moving fails.
    let finished = false;
    const filling = Promise.all(Array.from({ length: Math.min(FILL_WINDOW, n) }, worker)).finally(() => (finished = true));
    const watch = poll(() => finished || performance.now() - progressed > FILL_STALL_MS, Number.POSITIVE_INFINITY, 1000).then(() => {
      if (finished) return;
      throw new Error(
        `filling ${queue}: no publish done for ${FILL_STALL_MS / 1000} s (${fmt(done)} of ${fmt(n)} published, ${fmt(next - done)} under way)`,
      );
    });
    await Promise.race([filling, watch]);
  } finally {
    await publisher.close().catch(() => undefined);
  }
  progress(`  filled ${queue}: ${fmt(n)} large jobs in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/** Waits until the store holds `n` payloads (deletes run in the background after each ack). */
async function expectStore(store: PayloadStore, n: number, what: string): Promise<number> {
  let count = -1;
  const ok = await poll(async () => (count = await store.count()) === n, 20_000, 50);
  if (!ok) throw new Error(`${what}: the payload store holds ${fmt(count)} payloads, expected ${fmt(n)}`);
  return count;
}

function medianQueue(queues: QueueMemory[]): QueueMemory {
  const of = (key: keyof QueueMemory): number => (queues.length === 0 ? 0 : median(queues.map((q) => q[key])));
  return { messages: of('messages'), messageBytes: of('messageBytes'), messageBytesRam: of('messageBytesRam'), memory: of('memory') };
}

const mib = (bytes: number | undefined): string => (bytes === undefined ? '-' : (bytes / MiB).toFixed(1));

function showNode(m: NodeMemory): string {
  return `mem_used ${mib(m.memUsed)} MiB, Erlang VM ${mib(m.erlang)} MiB, binary ${mib(m.binary)} MiB`;
}

function showQueue(q: QueueMemory): string {
  return `${fmt(q.messages)} messages, ${mib(q.messageBytes)} MiB of bodies, ${mib(q.messageBytesRam)} MiB in RAM, queue process ${mib(q.memory)} MiB`;
}

/** Reads the broker's memory: the management API and, on the broker's machine, rabbitmqctl (read from the processes now). */
class BrokerProbe {
  private readonly base: URL;
  private readonly authorization: string;
  private readonly vhost: string;
  private ctl = false;
  private api = false;
  readonly sources: string[] = [];

  constructor(ctx: BenchContext) {
    const parsed = new URL(ctx.config.broker.management);
    this.authorization = `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString('base64')}`;
    parsed.username = '';
    parsed.password = '';
    if (!parsed.pathname.endsWith('/')) parsed.pathname += '/';
    this.base = parsed;
    this.vhost = vhostOfAmqpUrl(ctx.opts.url);
  }

  async detect(): Promise<void> {
    try {
      await this.get('overview');
      this.api = true;
      this.sources.push('management API');
    } catch {
      // No management plugin or no access.
    }
    try {
      await this.status();
      this.ctl = true;
      this.sources.push('rabbitmqctl');
    } catch {
      // Not on the broker's machine, or no Erlang cookie.
    }
    if (!this.api && !this.ctl) throw new Error('payloads: neither the management API nor rabbitmqctl answers: no broker memory to read');
  }

  /** The median of `READINGS` readings of each figure. */
  async node(): Promise<NodeMemory> {
    const readings: NodeMemory[] = [];
    for (let i = 0; i < READINGS; i++) {
      if (i > 0) await sleep(READING_GAP_MS);
      const reading: NodeMemory = {};
      if (this.api) {
        const nodes = await this.get<Array<{ mem_used?: number }>>('nodes?columns=name,mem_used');
        reading.memUsed = nodes.reduce((sum, node) => sum + (node.mem_used ?? 0), 0);
      }
      if (this.ctl) Object.assign(reading, await this.status());
      readings.push(reading);
    }
    const of = (key: keyof NodeMemory): number | undefined => {
      const values = readings.map((r) => r[key]).filter((v): v is number => v !== undefined);
      return values.length === 0 ? undefined : median(values);
    };
    const out: NodeMemory = {};
    for (const key of ['memUsed', 'erlang', 'binary'] as const) {
      const value = of(key);
      if (value !== undefined) out[key] = value;
    }
    return out;
  }

  /** One queue's messages and bytes: rabbitmqctl (now), else the management API once its sample caught up. */
  async queue(name: string): Promise<QueueMemory> {
    type Row = { name: string; messages?: number; memory?: number; message_bytes?: number; message_bytes_ram?: number };
    let row: Row | undefined;
    if (this.ctl) {
      const { stdout } = await run(
        'rabbitmqctl',
        ['-q', 'list_queues', '-p', this.vhost, 'name', 'messages', 'memory', 'message_bytes', 'message_bytes_ram', '--formatter', 'json'],
        { timeout: 120_000, maxBuffer: 256 * MiB },
      );
      row = (JSON.parse(stdout) as Row[]).find((q) => q.name === name);
    } else {
      await sleep(MEMORY_SETTLE_MS);
      row = await this.get<Row>(`queues/${encodeURIComponent(this.vhost)}/${encodeURIComponent(name)}`);
    }
    if (row === undefined) throw new Error(`payloads: queue ${name} not found on the broker`);
    return {
      messages: row.messages ?? 0,
      messageBytes: row.message_bytes ?? 0,
      messageBytesRam: row.message_bytes_ram ?? 0,
      memory: row.memory ?? 0,
    };
  }

  private async status(): Promise<Pick<NodeMemory, 'erlang' | 'binary'>> {
    const { stdout } = await run('rabbitmqctl', ['-q', 'status', '--formatter', 'json'], { timeout: 60_000, maxBuffer: 16 * MiB });
    const memory = (JSON.parse(stdout) as { memory: { total?: { erlang?: number }; binary?: number } }).memory;
    if (typeof memory.total?.erlang !== 'number') throw new Error('rabbitmqctl status: no memory total');
    return { erlang: memory.total.erlang, ...(typeof memory.binary === 'number' ? { binary: memory.binary } : {}) };
  }

  private async get<T>(path: string): Promise<T> {
    const response = await fetch(new URL(`api/${path}`, this.base), {
      headers: { authorization: this.authorization },
      signal: AbortSignal.timeout(30_000),
    });
    if (!response.ok) throw new Error(`GET /api/${path}: ${response.status}`);
    return (await response.json()) as T;
  }
}
