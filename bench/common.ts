import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import amqplib, { type Channel, type ChannelModel, type ConfirmChannel, type Options } from 'amqplib';
import { v7 as uuidv7 } from 'uuid';
import { compileConfig, createJob, type CompiledConfig, type LoadedStage, type Logger, type RawConfig } from '../src/index.js';
import { BrokerNames, toWire } from '../src/wire.js';
import { MAX_PAYLOAD_THRESHOLD } from '../src/config/defaults.js';
import { brokerCpuNow } from './broker-cpu.js';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const TENANT = 'bench';
export const JOB_TYPE = 'bench.job';
export const SCENARIOS = [
  'publish',
  'relay',
  'pipeline',
  'memory',
  'quorum',
  'tenants',
  'pooled',
  'fairness',
  'tracking',
  'jobstate',
  'payloads',
  'limits',
  'middleware',
  'events',
  'peers',
  'http',
  'workflows',
  'schedules',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface BenchOptions {
  url: string;
  /** Wire size of a job body, bytes. */
  size: number;
  prefetch: number;
  /** Publishes outstanding in the publish scenario. */
  window: number;
  jobs: number;
  pipelineJobs: number;
  backlog: number;
  smallBacklog: number;
  rounds: number;
  only: Set<Scenario>;
  json: boolean;
  /** Longest a round may take before it is failed as stalled. */
  roundTimeoutMs: number;
  /** How long the memory child is sampled once it holds its prefetch. */
  memSampleMs: number;
  /** Tenants the `tenants` scenario provisions; idle tenants of the `pooled` scenario's memory part. */
  tenants: number;
  /** `tenants`: how long the --all-tenants process is sampled idle (over a membership resync, 30 s). */
  idleSeconds: number;
  /** `tenants`: jobs timed, each for a random tenant, one at a time. */
  latencyJobs: number;
  /** Busy tenants of the `pooled` scenario's relay (each with jobs / busyTenants waiting). */
  busyTenants: number;
  /** Jobs of the flooding tenant in the `fairness` scenario. */
  flood: number;
  /** `payloads`: large jobs per round (each side), their args' size in bytes, the store, prefetch = concurrency of their stages. */
  payloadJobs: number;
  payloadSize: number;
  payloadStore: 'fs' | 'postgres';
  payloadPrefetch: number;
  /** `payloads`: the PostgreSQL store's database, and its pool size (undefined: the store's default). */
  postgresUrl: string;
  payloadPool: number | undefined;
  /** `peers`: handlers at once (stagecoach, BullMQ), deliveries in flight (amqplib, stagecoach), bytes of a job's args. */
  peerConcurrency: number;
  peerPrefetch: number;
  peerArgs: number;
  /** `workflows`: steps of the chain and jobs of the group. */
  workflowSteps: number;
  /** `schedules`: tenants of the per-tenant schedule. */
  scheduleTenants: number;
}

const USAGE = `usage: node dist/bench/index.js [options]
  --size <bytes>       job body size on the wire (default 1024)
  --prefetch <n>       prefetch of every consumer; stagecoach concurrency = prefetch (default 500)
  --window <n>         confirms outstanding in the publish scenario (default = prefetch)
  --jobs <n>           jobs per round for publish and relay (default 50000)
  --pipeline-jobs <n>  jobs per pipeline round (default jobs/4)
  --backlog <n>        memory: the large backlog (default 200000; the small one is 1000)
  --rounds <n>         rounds per side, alternated baseline/stagecoach; the median is reported (default 3)
  --only <list>        any of publish,relay,pipeline,memory,quorum,tenants,pooled,fairness,tracking,jobstate,payloads,limits,middleware,events,peers,http,schedules,workflows (default all)
  --timeout <s>        a round that takes longer fails as stalled (default 30 + jobs/1000)
  --mem-seconds <s>    memory: how long the stage is sampled (default 4)
  --tenants <n>        tenants: how many tenants of the example pipeline are provisioned and served
                       by one --all-tenants process; pooled: idle tenants of the memory child (default 1000)
  --idle-seconds <s>   tenants: how long the --all-tenants process is sampled idle (default 35, over
                       one membership resync)
  --latency-jobs <n>   tenants: jobs timed, each for a random tenant, one at a time (default 100)
  --busy-tenants <n>   pooled: tenants sharing the relay's --jobs (default 100)
  --flood <n>          fairness: the flooding tenant's jobs (default 50000; the 3:1 tenants get a tenth each)
  --payload-jobs <n>   payloads: large jobs per round, kept waiting on the broker (default 300; mind its memory)
  --payload-size <b>   payloads: bytes of a large job's args (default 1048576: the message is above the 1 MiB threshold)
  --payload-store <k>  payloads: fs (a temporary directory, default) or postgres (a table of its own, dropped at the end)
  --payload-prefetch <n>  payloads: prefetch = concurrency of the large jobs' stages (default 16)
  --payload-pool <n>   payloads: pool_size of the postgres store (default the store's, 4)
  --postgres <url>     payloads: the database of the postgres store (default env PAYLOADS_POSTGRES_URL or
                       postgres://postgres@127.0.0.1:5432/test)
  --peer-concurrency <n>  peers: handlers at once of stagecoach and BullMQ (default 16)
  --peer-prefetch <n>  peers: prefetch of the hand-written relay and the stagecoach stages (default 64)
  --peer-args <bytes>  peers: size of a job's one string argument (default 32)
  --workflow-steps <n>  workflows: steps of the chain, jobs of the group (default 100)
  --schedule-tenants <n>  schedules: tenants of the per-tenant schedule fired (default 10000)
  --url <amqp-url>     broker (default env AMQP_URL or amqp://guest:guest@127.0.0.1:5672/)
  --json               print the results as JSON on stdout (the table goes to stderr)`;

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      size: { type: 'string' },
      prefetch: { type: 'string' },
      window: { type: 'string' },
      jobs: { type: 'string' },
      'pipeline-jobs': { type: 'string' },
      backlog: { type: 'string' },
      rounds: { type: 'string' },
      only: { type: 'string' },
      timeout: { type: 'string' },
      'mem-seconds': { type: 'string' },
      tenants: { type: 'string' },
      'busy-tenants': { type: 'string' },
      'idle-seconds': { type: 'string' },
      'latency-jobs': { type: 'string' },
      flood: { type: 'string' },
      'payload-jobs': { type: 'string' },
      'payload-size': { type: 'string' },
      'payload-store': { type: 'string' },
      'payload-pool': { type: 'string' },
      'payload-prefetch': { type: 'string' },
      postgres: { type: 'string' },
      'peer-concurrency': { type: 'string' },
      'peer-prefetch': { type: 'string' },
      'peer-args': { type: 'string' },
      'workflow-steps': { type: 'string' },
      'schedule-tenants': { type: 'string' },
      url: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const int = (name: string, raw: string | undefined, fallback: number, min = 1): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw.replace(/_/g, ''));
    if (!Number.isInteger(value) || value < min) throw new UsageError(`--${name} must be an integer >= ${min}, got "${raw}"`);
    return value;
  };
  const jobs = int('jobs', values.jobs, 50_000);
  const prefetch = int('prefetch', values.prefetch, 500);
  const only = new Set<Scenario>();
  for (const part of (values.only ?? SCENARIOS.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (!(SCENARIOS as readonly string[]).includes(part))
      throw new UsageError(`--only: unknown scenario "${part}" (known: ${SCENARIOS.join(', ')})`);
    only.add(part as Scenario);
  }
  const payloadStore = values['payload-store'] ?? 'fs';
  if (payloadStore !== 'fs' && payloadStore !== 'postgres')
    throw new UsageError(`--payload-store must be fs or postgres, got "${payloadStore}"`);
  const pipelineJobs = int('pipeline-jobs', values['pipeline-jobs'], Math.max(1, Math.round(jobs / 4)));
  return {
    url: values.url ?? process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672/',
    size: int('size', values.size, 1024),
    prefetch,
    window: int('window', values.window, prefetch),
    jobs,
    pipelineJobs,
    backlog: int('backlog', values.backlog, 200_000),
    smallBacklog: 1000,
    rounds: int('rounds', values.rounds, 3),
    only,
    json: values.json ?? false,
    roundTimeoutMs: int('timeout', values.timeout, Math.round(30 + Math.max(jobs, pipelineJobs) / 1000)) * 1000,
    memSampleMs: int('mem-seconds', values['mem-seconds'], 4) * 1000,
    tenants: int('tenants', values.tenants, 1000),
    busyTenants: int('busy-tenants', values['busy-tenants'], 100),
    idleSeconds: int('idle-seconds', values['idle-seconds'], 35),
    latencyJobs: int('latency-jobs', values['latency-jobs'], 100),
    flood: int('flood', values.flood, 50_000),
    payloadJobs: int('payload-jobs', values['payload-jobs'], 300),
    payloadSize: int('payload-size', values['payload-size'], 1024 * 1024),
    payloadStore,
    payloadPrefetch: int('payload-prefetch', values['payload-prefetch'], 16),
    postgresUrl: values.postgres ?? process.env.PAYLOADS_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    payloadPool: values['payload-pool'] === undefined ? undefined : int('payload-pool', values['payload-pool'], 4),
    peerConcurrency: int('peer-concurrency', values['peer-concurrency'], 16),
    peerPrefetch: int('peer-prefetch', values['peer-prefetch'], 64),
    peerArgs: int('peer-args', values['peer-args'], 32, 0),
    workflowSteps: int('workflow-steps', values['workflow-steps'], 100),
    scheduleTenants: int('schedule-tenants', values['schedule-tenants'], 10_000),
  };
}

export class UsageError extends Error {}

/** Everything a scenario needs: options, the compiled config, the loaded stages. */
export interface BenchContext {
  opts: BenchOptions;
  config: CompiledConfig;
  raw: RawConfig;
  source: string;
  names: BrokerNames;
  stages: Map<string, LoadedStage>;
  log: Logger;
}

/** Durable queues and persistent messages, like the baseline; a prefix of its own. */
export function benchConfig(opts: BenchOptions): { raw: RawConfig; source: string; config: CompiledConfig } {
  const stage = { module: './bench-stages.js', concurrency: opts.prefetch, prefetch: opts.prefetch };
  const id = randomBytes(4).toString('hex');
  const raw: RawConfig = {
    prefix: `bench-${id}`,
    broker: { url: opts.url },
    tenants: [TENANT],
    httpPort: 0,
    queues: {
      // Job tracking off by default here: every scenario but `jobstate` measures what it measured
      // before tracking was on by default (docs/job-state.md); `jobstate` turns it on for its pair.
      _default: { tracking: false },
      ...Object.fromEntries(
        ['relay_a', 'relay_b', 'pub_sink', 'p_0', 'p_1', 'p_2', 'p_3', 'p_4', 'p_5', 'mem_in'].map((q) => [
          q,
          { scope: 'tenant' as const },
        ]),
      ),
    },
    stages: {
      relay_ab: stage,
      relay_ba: stage,
      qrelay_ab: stage,
      qrelay_ba: stage,
      pipe1: stage,
      pipe2: stage,
      pipe3: stage,
      hold: stage,
    },
  };
  // Scenario `quorum`: the relay's queues again, quorum. Only when it runs: a quorum queue also
  // makes the shared delay ladder quorum (src/topology/queue-type.ts), which the others do not need.
  const quorumType = opts.only.has('quorum') ? ('quorum' as const) : ('classic' as const);
  for (const q of ['qrelay_a', 'qrelay_b']) (raw.queues as Record<string, object>)[q] = { scope: 'tenant', type: quorumType };
  // Scenario `tracking`: a second relay pair whose backlog is batched (bench/tracking.ts).
  for (const q of ['trk_a', 'trk_b']) (raw.queues as Record<string, object>)[q] = { scope: 'tenant' };
  Object.assign(raw.stages as Record<string, object>, { trk_ab: stage, trk_ba: stage });
  // Scenario `jobstate`: a relay pair with job tracking on, folded into a PostgreSQL job store (bench/jobstate.ts).
  for (const q of ['js_a', 'js_b']) (raw.queues as Record<string, object>)[q] = { scope: 'tenant', tracking: true };
  // Scenario `http`: the relay pair of the HTTP workers (bench/http-relay.ts), tracking on as the binding's acks need.
  for (const q of ['http_a', 'http_b']) (raw.queues as Record<string, object>)[q] = { scope: 'tenant', tracking: true };
  Object.assign(raw.stages as Record<string, object>, { js_ab: stage, js_ba: stage });
  // Scenario `workflows` (bench/workflows.ts): one trivial step stage.
  (raw.queues as Record<string, object>).wf_steps = { scope: 'tenant' };
  (raw.stages as Record<string, object>).wf_step = stage;
  raw.tracking = { store: { kind: 'postgres', url: opts.postgresUrl, table: `bench_jobs_${id}` } };
  // Scenario `payloads` (bench/payloads.ts): large jobs relayed inline (a threshold above them) and
  // offloaded (the default 1 MiB threshold), in a store of their own (deleted at the end).
  const large = { module: './bench-stages.js', concurrency: opts.payloadPrefetch, prefetch: opts.payloadPrefetch };
  Object.assign(raw.queues as Record<string, object>, {
    pl_inline_a: { scope: 'tenant', payload_threshold: MAX_PAYLOAD_THRESHOLD },
    pl_inline_b: { scope: 'tenant', payload_threshold: MAX_PAYLOAD_THRESHOLD },
    pl_off_a: { scope: 'tenant' },
    pl_off_b: { scope: 'tenant' },
  });
  for (const name of ['pl_inline_ab', 'pl_inline_ba', 'pl_off_ab', 'pl_off_ba', 'pl_drain_a', 'pl_drain_b'])
    (raw.stages as Record<string, object>)[name] = large;
  raw.payloads = {
    store:
      opts.payloadStore === 'postgres'
        ? {
            kind: 'postgres',
            url: opts.postgresUrl,
            table: `bench_payloads_${id}`,
            ...(opts.payloadPool === undefined ? {} : { pool_size: opts.payloadPool }),
          }
        : { kind: 'fs', dir: path.join(os.tmpdir(), `bench-${id}-payloads`) },
  };
  // Scenario `peers` (bench/peers.ts): per side, a relay pair and a pipeline ring; `xa`, `xb` and
  // `xo` are the hand-written sides' (declared here; `xa` and `xb` written by the default exchange).
  const peerQueues: Record<string, object> = {};
  for (const side of ['xa', 'xb', 'xo', 'xs', 'xt', 'xv']) {
    for (const q of side === 'xv' ? ['r0', 'r1'] : ['r0', 'r1', 'p0', 'p1', 'p2', 'p3']) {
      peerQueues[`${side}_${q}`] =
        side === 'xa' || side === 'xb' || side === 'xo' || side === 'xs'
          ? { scope: 'shared' }
          : { scope: 'tenant', ...(side === 'xv' ? { variants: { by: 'kind', values: { special: ['special'] } } } : {}) };
    }
  }
  Object.assign(raw.queues as Record<string, object>, peerQueues);
  const peerStage = { module: './peer-stages.js', concurrency: opts.peerConcurrency, prefetch: opts.peerPrefetch };
  for (const side of ['xs', 'xt', 'xv']) {
    const names = side === 'xv' ? ['r01', 'r10'] : ['r01', 'r10', 'p01', 'p12', 'p23', 'p30'];
    for (const name of names) (raw.stages as Record<string, object>)[`${side}_${name}`] = peerStage;
  }
  // Stage modules resolve beside this (virtual) file: dist/bench/bench-stages.js.
  const source = path.join(HERE, 'bench.config.json');
  return { raw, source, config: compileConfig(raw, source) };
}

/**
 * The args padding for which a job body for `queue` is `size` bytes. Jobs that fill a backlog
 * carry a `meta.parent_id`, as emitted jobs do, so that inputs and outputs have the same size.
 */
export function padFor(size: number, queue: string, withParent: boolean): string {
  const bare = Buffer.byteLength(JSON.stringify(rawJob(queue, JOB_TYPE, [''], withParent ? uuidv7() : undefined)));
  return 'x'.repeat(Math.max(0, size - bare));
}

/** The body size jobs actually get: `size`, or the bare envelope's when `size` is below it. */
export function bodySize(size: number): number {
  return Buffer.byteLength(JSON.stringify(rawJob('relay_a', JOB_TYPE, [padFor(size, 'relay_a', true)], uuidv7())));
}

// ---------------------------------------------------------------------------------------------
// The hand-written side: the same envelope and properties stagecoach puts on the wire
// (src/job/amqp-mapping.ts), built by hand.

export const CONTENT_TYPE = 'application/openjobspec+json';

export interface RawEnvelope {
  specversion: string;
  id: string;
  type: string;
  queue: string;
  args: unknown[];
  meta: Record<string, unknown>;
  attempt: number;
  created_at: string;
  /** Undefined on a shared queue's job (JSON.stringify leaves it out). */
  tenant: string | undefined;
}

export function rawJob(queue: string, type: string, args: unknown[], parentId?: string): RawEnvelope {
  return {
    specversion: '1.0.0-rc.1',
    id: uuidv7(),
    type,
    queue,
    args,
    meta: parentId === undefined ? {} : { parent_id: parentId },
    attempt: 1,
    created_at: new Date().toISOString(),
    tenant: TENANT,
  };
}

/** traceparent continuing `parent`'s trace (or a new one) with a new span id. */
export function rawTraceparent(parent: unknown): string {
  const traceId = typeof parent === 'string' && parent.length === 55 ? parent.slice(3, 35) : randomBytes(16).toString('hex');
  return `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
}

export function rawOptions(job: RawEnvelope, traceparent: string): Options.Publish {
  return {
    messageId: job.id,
    type: job.type,
    contentType: CONTENT_TYPE,
    persistent: true,
    timestamp: Math.floor(Date.now() / 1000),
    headers: {
      'x-ojs-queue': job.queue,
      'x-ojs-attempt': 1,
      ...(job.tenant === undefined ? {} : { 'x-ojs-tenant': job.tenant }),
      'x-ojs-traceparent': traceparent,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Broker helpers (plain amqplib, not measured).

export async function connect(url: string, name: string): Promise<ChannelModel> {
  const connection = await amqplib.connect(url, { clientProperties: { connection_name: name } });
  connection.on('error', () => undefined);
  return connection;
}

/** Closes channels, then the connection; never throws. */
export async function closeQuietly(connection: ChannelModel | undefined, ...channels: Array<Channel | undefined>): Promise<void> {
  for (const channel of channels) await channel?.close().catch(() => undefined);
  await connection?.close().catch(() => undefined);
}

/**
 * Fills a tenant queue through the root exchange with `n` jobs in stagecoach's own wire format
 * (createJob + toWire), as a producer would, `meta.parent_id` included (see `padFor`).
 */
export async function fill(
  ctx: BenchContext,
  queue: string,
  n: number,
  { persistent = true, window = 2000, meta = {} as Record<string, unknown> } = {},
): Promise<void> {
  const connection = await connect(ctx.opts.url, 'bench-filler');
  let channel: ConfirmChannel | undefined;
  const started = performance.now();
  try {
    channel = await connection.createConfirmChannel();
    const ch = channel;
    // Extra meta (a batch) takes its bytes from the padding: jobs stay `--size` bytes either way.
    const extra = Buffer.byteLength(JSON.stringify({ ...meta, p: 0 })) - Buffer.byteLength(JSON.stringify({ p: 0 }));
    const pad = padFor(ctx.opts.size, queue, true).slice(extra);
    await withTimeout(
      new Promise<void>((resolve, reject) => {
        let sent = 0;
        let confirmed = 0;
        const sendOne = (): void => {
          sent++;
          const job = createJob({ type: JOB_TYPE, args: [pad], meta: { parent_id: uuidv7(), ...meta } }, { queue, tenant: TENANT });
          const wire = toWire(job, { tenantHeader: ctx.config.tenantHeader, traceparent: rawTraceparent(undefined) });
          ch.publish(ctx.names.root, queue, wire.content, { ...wire.options, persistent }, (err: unknown) => {
            if (err) return reject(new Error(`filling ${queue}: broker nacked a job`));
            confirmed++;
            if (confirmed === n) resolve();
            else if (sent < n) sendOne();
          });
        };
        for (let i = 0; i < Math.min(window, n); i++) sendOne();
      }),
      // At least 1,000 jobs/s, however short the round timeout.
      Math.max(ctx.opts.roundTimeoutMs * 2, 30_000 + n),
      `filling ${queue} with ${n} jobs`,
    );
  } finally {
    await closeQuietly(connection, channel);
  }
  progress(
    `  filled ${queue}: ${fmt(n)}${persistent ? '' : ' non-persistent'} jobs in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}

/** Ready messages in a physical queue. */
export async function queueCount(url: string, queue: string): Promise<number> {
  const connection = await connect(url, 'bench-check');
  let channel: Channel | undefined;
  try {
    channel = await connection.createChannel();
    channel.on('error', () => undefined);
    return (await channel.checkQueue(queue)).messageCount;
  } finally {
    await closeQuietly(connection, channel);
  }
}

/** Polls until each queue holds exactly its expected count; fails naming what it saw. */
export async function expectCounts(url: string, expected: Record<string, number>, what: string, timeoutMs = 20_000): Promise<void> {
  const connection = await connect(url, 'bench-check');
  let channel: Channel | undefined;
  try {
    channel = await connection.createChannel();
    const ch = channel;
    let seen: Record<string, number> = {};
    const ok = await poll(
      async () => {
        seen = {};
        for (const queue of Object.keys(expected)) seen[queue] = (await ch.checkQueue(queue)).messageCount;
        return Object.entries(expected).every(([queue, n]) => seen[queue] === n);
      },
      timeoutMs,
      50,
    );
    if (!ok) {
      throw new Error(`${what}: expected ${JSON.stringify(expected)} messages, the broker has ${JSON.stringify(seen)}`);
    }
  } finally {
    await closeQuietly(connection, channel);
  }
}

export async function purgeQueues(url: string, queues: string[]): Promise<void> {
  const connection = await connect(url, 'bench-purge');
  let channel: Channel | undefined;
  try {
    channel = await connection.createChannel();
    for (const queue of queues) await channel.purgeQueue(queue);
  } finally {
    await closeQuietly(connection, channel);
  }
}

// ---------------------------------------------------------------------------------------------
// Timing.

/** Resolves true when `check` holds, false after `timeoutMs`. */
export async function poll(check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 5): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > deadline) return false;
    await sleep(everyMs);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${(ms / 1000).toFixed(0)} s: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Stops a child process and waits for it to exit: SIGTERM, then SIGKILL after `graceMs`. A child
 * still shutting down when the bench deletes its prefix would declare what it lost again.
 */
export async function stopProcess(child: ChildProcess, what: string, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await withTimeout(exited, graceMs, `stopping ${what}`).catch(async () => {
    child.kill('SIGKILL');
    // A child that never started (spawn failed) never exits: bounded too.
    await withTimeout(exited, 5_000, `killing ${what}`).catch(() => undefined);
  });
}

/** Process CPU time, user + system, µs. */
export function cpuNow(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

/** performance.now() (ms) -> the monotonic clock of process.hrtime and of V8 CPU profiles (µs). */
const HR_OFFSET_US = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
export function toHrUs(perfMs: number): number {
  return Math.round(perfMs * 1000 + HR_OFFSET_US);
}

export interface Mark {
  /** performance.now() */
  at: number;
  /** cpuNow() */
  cpu: number;
  /** brokerCpuNow(), when the broker runs on this machine. */
  broker?: number | undefined;
}

/** The time, the client's CPU and the broker's CPU now. */
export function markNow(): Mark {
  return { at: performance.now(), cpu: cpuNow(), broker: brokerCpuNow() };
}

/**
 * Waits until `done()` reaches `n` (polled every 5 ms; the same for both sides), failing when
 * `failed` rejects first or the round takes longer than the round timeout.
 * @returns the time and CPU when the count was seen.
 */
export async function waitDone(ctx: BenchContext, what: string, n: number, done: () => number, failed?: Promise<Error>): Promise<Mark> {
  const end: Mark = { at: 0, cpu: 0 };
  const finished = (async () => {
    const ok = await poll(() => done() >= n, ctx.opts.roundTimeoutMs, 5);
    end.at = performance.now();
    end.cpu = cpuNow();
    end.broker = brokerCpuNow();
    if (!ok) {
      throw new Error(
        `${what} stalled: ${fmt(done())}/${fmt(n)} jobs done after ${(ctx.opts.roundTimeoutMs / 1000).toFixed(0)} s (raise --timeout if the machine is just slow)`,
      );
    }
  })();
  const racers: Promise<void>[] = [finished];
  if (failed) racers.push(failed.then((err) => Promise.reject(new Error(`${what} failed: ${err.message}`))));
  await Promise.race(racers);
  return end;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** One measured round. */
export interface Round {
  /** `baseline` or `stagecoach`; the peers scenario names its sides (bench/peers.ts). */
  side: string;
  jobs: number;
  seconds: number;
  jobsPerSecond: number;
  /** CPU time of this (Node) process per job, µs: the client's cost, whatever the broker does. */
  cpuUsPerJob: number;
  /**
   * CPU time of the broker's processes per job, µs, when the broker runs on this machine
   * (broker-cpu.ts): includes what it did for other clients meanwhile.
   */
  brokerCpuUsPerJob?: number;
  /** The round on the clock of V8 CPU profiles (µs), for bench/profile.ts. */
  windowUs: [number, number];
}

export interface ThroughputResult {
  scenario: string;
  detail: string;
  /** Median jobs/s. */
  baseline: number;
  stagecoach: number;
  /** stagecoach / baseline. */
  ratio: number;
  /** Median client CPU µs per job. */
  baselineCpuUsPerJob: number;
  stagecoachCpuUsPerJob: number;
  /** Median broker CPU µs per job, when measured. */
  baselineBrokerCpuUsPerJob?: number;
  stagecoachBrokerCpuUsPerJob?: number;
  rounds: Round[];
}

/** The rounds relabelled as one side of a summary (the baseline or the stagecoach column). */
export function asSide(rounds: Round[], side: Round['side']): Round[] {
  return rounds.map((round) => ({ ...round, side }));
}

/**
 * Runs `rounds` rounds of two sides, alternating which goes first so that neither always runs
 * right after the other (a warm broker, a settling machine): odd rounds run the pair's first,
 * even rounds its second first. `pair` is called at the start of each round (it may run a round
 * of its own first) and answers the two sides of that round.
 */
export async function alternatingRounds(
  rounds: number,
  pair: (round: number) => Promise<[() => Promise<void>, () => Promise<void>]> | [() => Promise<void>, () => Promise<void>],
): Promise<void> {
  for (let r = 1; r <= rounds; r++) {
    progress(`  round ${r}/${rounds}`);
    const [one, other] = await pair(r);
    if (r % 2 === 1) {
      await one();
      await other();
    } else {
      await other();
      await one();
    }
  }
}

export function summarise(scenario: string, detail: string, rounds: Round[]): ThroughputResult {
  const of = (side: Round['side'], key: 'jobsPerSecond' | 'cpuUsPerJob' | 'brokerCpuUsPerJob'): number =>
    median(rounds.filter((r) => r.side === side).map((r) => r[key] ?? Number.NaN));
  const broker = rounds.every((r) => r.brokerCpuUsPerJob !== undefined);
  const baseline = of('baseline', 'jobsPerSecond');
  const stagecoach = of('stagecoach', 'jobsPerSecond');
  return {
    scenario,
    detail,
    baseline,
    stagecoach,
    ratio: stagecoach / baseline,
    baselineCpuUsPerJob: of('baseline', 'cpuUsPerJob'),
    stagecoachCpuUsPerJob: of('stagecoach', 'cpuUsPerJob'),
    ...(broker
      ? {
          baselineBrokerCpuUsPerJob: of('baseline', 'brokerCpuUsPerJob'),
          stagecoachBrokerCpuUsPerJob: of('stagecoach', 'brokerCpuUsPerJob'),
        }
      : {}),
    rounds,
  };
}

export function round(side: Round['side'], jobs: number, start: Mark, end: Mark): Round {
  const seconds = (end.at - start.at) / 1000;
  const result: Round = {
    side,
    jobs,
    seconds,
    jobsPerSecond: jobs / seconds,
    cpuUsPerJob: (end.cpu - start.cpu) / jobs,
    windowUs: [toHrUs(start.at), toHrUs(end.at)],
  };
  if (start.broker !== undefined && end.broker !== undefined) result.brokerCpuUsPerJob = (end.broker - start.broker) / jobs;
  const broker = result.brokerCpuUsPerJob === undefined ? '' : `, broker CPU ${result.brokerCpuUsPerJob.toFixed(0)} µs/job`;
  progress(
    `    ${side.padEnd(10)} ${fmt(jobs)} jobs in ${seconds.toFixed(2)} s = ${fmt(result.jobsPerSecond).padStart(6)} jobs/s, ` +
      `client CPU ${result.cpuUsPerJob.toFixed(0)} µs/job (${((100 * (end.cpu - start.cpu)) / 1e6 / seconds).toFixed(0)}% of a core)${broker}`,
  );
  return result;
}
