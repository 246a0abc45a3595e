/**
 * Scenario `pooled`: one stage process serving many tenants (`run --tenants`), against the same
 * stage serving one tenant.
 *
 * - Memory: a child process (bench/pooled-child.ts) runs the pooled `relay_ab` stage for
 *   `--tenants` (1,000) idle tenants, then for 1 tenant of the same configuration; each is
 *   measured once every tenant consumes, after a settling pause and a GC. Target: the 1,000-tenant
 *   process's RSS at most 2x the 1-tenant one's.
 * - Relay throughput: the `relay_ab` / `relay_ba` stages (the relay scenario's) pooled over
 *   `--busy-tenants` (100) tenants, each with jobs/100 waiting, against a plain single-tenant
 *   `StageGroup` (what `run <stage> --tenant solo` runs) with all the jobs waiting for its one
 *   tenant; same stage settings (concurrency = prefetch = `--prefetch`; the pooled process's
 *   per-tenant prefetch is the default `tenant_prefetch`). Rounds alternate, the median is
 *   reported. Target: pooled >= 0.9x single-tenant.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { loadStage, StageGroup, type LoadedStage, type StageMetadata } from '../src/index.js';
import { declareTopologyOnce, provisionTopology } from '../src/wire.js';
import { probe } from './bench-stages.js';
import {
  bodySize,
  cpuNow,
  expectCounts,
  fmt,
  HERE,
  padFor,
  progress,
  round,
  sleep,
  summarise,
  withTimeout,
  waitDone,
  type BenchContext,
  type Mark,
  type Round,
  type ThroughputResult,
} from './common.js';
import { processCpuNow } from './broker-cpu.js';
import { children, readStatus } from './memory.js';
import { dropSubConfig, fillTenants, subConfig, type SubConfig } from './sub-prefix.js';

const MiB = 1024 * 1024;
const SETTLE_MS = 500;
/** The single-tenant side's tenant: as long a name as the pooled side's, so the bodies are the same size. */
const SOLO = 'solo';

export interface PooledRss {
  tenants: number;
  /** Seconds from start() to every tenant consuming. */
  startSeconds: number;
  /** Channels of the pooled process (publisher, suspects, work). */
  channels: number;
  /** Highest VmRSS while sampled, after the settle and the GC, MiB. */
  rssMiB: number;
  /** VmHWM: the peak, start (declarations) included, MiB. */
  peakRssMiB: number;
  /** V8 heapUsed after the GC, MiB. */
  heapUsedMiB: number;
  /** CPU while idle (every tenant consuming, no job), % of one core, over the sampling window. */
  idleCpuPercent: number;
  /** Seconds from the process's start (modules, connection) to every tenant consuming. */
  processSeconds: number;
  /** Tenants the process served once ready. */
  served: number;
}

/** How a pooled child runs and is measured. */
export interface ChildOptions {
  /** @defaultValue relay_ab */
  stage?: string;
  /** `run --all-tenants`: `tenants` empty, every tenant provisioned is served. @defaultValue false */
  follow?: boolean;
  /** How long it is sampled idle. @defaultValue --mem-seconds */
  idleMs?: number;
  /** How long it may take to consume. @defaultValue 120 s, or 200 ms per tenant */
  readyTimeoutMs?: number;
  /** Run after the idle sampling, while the child still runs (jobs through it). */
  whileRunning?: () => Promise<void>;
}

export interface PooledResult {
  scenario: 'pooled';
  one: PooledRss;
  many: PooledRss;
  /** many.rssMiB / one.rssMiB. Target <= 2. */
  rssRatio: number;
  /** (many - one) RSS per extra tenant, KiB. */
  kibPerTenant: number;
  /** Pooled (stagecoach column) against single-tenant (baseline column). Target ratio >= 0.9. */
  relay: ThroughputResult;
  busyTenants: number;
  tenantPrefetch: number;
}

export const POOLED_TARGETS = { rssRatio: 2, relayRatio: 0.9 };

/**
 * The relay stages as the relay scenario runs them (concurrency = prefetch = --prefetch); in a
 * pooled process each tenant gets prefetch / --busy-tenants, so that the deliveries in flight are
 * the same on both sides of the relay (the default, prefetch, would put the
 * whole backlog of 100 tenants in the process's hands at once).
 */
function relayStages(
  ctx: BenchContext,
): Record<string, { module: string; concurrency: number; prefetch: number; tenant_prefetch: number }> {
  const stage = {
    module: './bench-stages.js',
    concurrency: ctx.opts.prefetch,
    prefetch: ctx.opts.prefetch,
    tenant_prefetch: Math.max(1, Math.round(ctx.opts.prefetch / ctx.opts.busyTenants)),
  };
  return { relay_ab: stage, relay_ba: stage };
}

const RELAY_QUEUES = { relay_a: { scope: 'tenant' as const }, relay_b: { scope: 'tenant' as const } };

export async function benchPooled(ctx: BenchContext): Promise<PooledResult> {
  const { one, many } = await benchPooledMemory(ctx);
  const { relay, tenantPrefetch } = await benchPooledRelay(ctx);
  return {
    scenario: 'pooled',
    one,
    many,
    rssRatio: many.rssMiB / one.rssMiB,
    kibPerTenant: ((many.rssMiB - one.rssMiB) * 1024) / Math.max(1, many.tenants - one.tenants),
    relay,
    busyTenants: ctx.opts.busyTenants,
    tenantPrefetch,
  };
}

// ---------------------------------------------------------------------------------------------
// Memory.

async function benchPooledMemory(ctx: BenchContext): Promise<{ one: PooledRss; many: PooledRss }> {
  const n = ctx.opts.tenants;
  const tenants = Array.from({ length: n }, (_, i) => `i${String(i).padStart(5, '0')}`);
  const sub = subConfig(ctx, 'idle', { tenants, queues: RELAY_QUEUES, stages: relayStages(ctx) });
  progress(
    `pooled memory: the relay_ab stage pooled over 1 and over ${fmt(n)} idle tenants, a child process each (prefix ${sub.config.prefix})`,
  );
  try {
    const one = await measureChild(ctx, sub, tenants.slice(0, 1));
    const many = await measureChild(ctx, sub, tenants);
    return { one, many };
  } finally {
    await withTimeout(dropSubConfig(ctx, sub), Math.max(120_000, n * 300), `deleting ${sub.config.prefix}`).catch((err: Error) =>
      progress(`  warning: ${err.message} (the cleanup tries again at the end)`),
    );
  }
}

interface ChildMessage {
  kind: string;
  message?: string;
  startSeconds?: number;
  channels?: number;
  heapUsed?: number;
  gc?: boolean;
  processSeconds?: number;
  served?: number;
}

export async function measureChild(ctx: BenchContext, sub: SubConfig, tenants: string[], options: ChildOptions = {}): Promise<PooledRss> {
  const { stage = 'relay_ab', follow = false, idleMs = ctx.opts.memSampleMs } = options;
  const readyTimeoutMs = options.readyTimeoutMs ?? Math.max(120_000, tenants.length * 200);
  const what = follow ? 'pooled child (--all-tenants)' : `pooled child (${fmt(tenants.length)} tenants)`;
  const child = spawn(process.execPath, ['--expose-gc', path.join(HERE, 'pooled-child.js')], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: {
      ...process.env,
      BENCH_POOLED_CHILD: JSON.stringify({ raw: sub.raw, source: ctx.source, stage, tenants, settleMs: 2000, follow, readyTimeoutMs }),
    },
  });
  children.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = new Promise<ChildMessage>((resolve, reject) => {
    child.on('message', (message: ChildMessage) => {
      if (message.kind === 'ready') resolve(message);
      if (message.kind === 'error') reject(new Error(`${what}: ${message.message}`));
    });
    void exited.then((code) => reject(new Error(`${what} exited with ${code} before it was ready: ${stderr.trim()}`)));
  });
  try {
    const report = await withTimeout(ready, readyTimeoutMs + 30_000, `${what} to consume`);
    if (report.gc !== true) progress('  warning: the child ran without --expose-gc; RSS measured without a GC');
    let rss = 0;
    let hwm = 0;
    const cpuFrom = processCpuNow([child.pid as number]);
    const from = performance.now();
    const until = from + idleMs;
    while (performance.now() < until) {
      const status = await readStatus(child.pid as number).catch(() => {
        throw new Error(`${what} exited while it was sampled: ${stderr.trim().slice(-500)}`);
      });
      rss = Math.max(rss, status.rss);
      hwm = Math.max(hwm, status.hwm);
      await sleep(100);
    }
    const cpuTo = processCpuNow([child.pid as number]);
    const idleUs = cpuFrom === undefined || cpuTo === undefined ? 0 : cpuTo - cpuFrom;
    const served = report.served ?? tenants.length;
    const sample: PooledRss = {
      tenants: follow ? served : tenants.length,
      served,
      processSeconds: report.processSeconds ?? 0,
      startSeconds: report.startSeconds ?? 0,
      channels: report.channels ?? 0,
      rssMiB: rss / MiB,
      peakRssMiB: hwm / MiB,
      heapUsedMiB: (report.heapUsed ?? 0) / MiB,
      idleCpuPercent: idleUs / 10 / (performance.now() - from),
    };
    progress(
      `    ${fmt(sample.tenants).padStart(5)} tenant(s): consuming ${sample.startSeconds.toFixed(1)} s after start() (${sample.processSeconds.toFixed(1)} s after the process started) on ${sample.channels} channels; ` +
        `RSS ${sample.rssMiB.toFixed(1)} MiB (peak ${sample.peakRssMiB.toFixed(1)}), heap ${sample.heapUsedMiB.toFixed(1)} MiB after GC; ` +
        `idle CPU ${sample.idleCpuPercent.toFixed(1)}% of a core over ${(idleMs / 1000).toFixed(0)} s`,
    );
    await options.whileRunning?.();
    return sample;
  } finally {
    child.send('stop', () => undefined);
    const code = await withTimeout(exited, 60_000, `${what} to stop`).catch(() => {
      child.kill('SIGKILL');
      return 'killed';
    });
    children.delete(child);
    if (code !== 0) progress(`  warning: ${what} exited with ${String(code)}: ${stderr.trim().slice(-500)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Relay throughput.

async function benchPooledRelay(ctx: BenchContext): Promise<{ relay: ThroughputResult; tenantPrefetch: number }> {
  const busy = ctx.opts.busyTenants;
  const perTenant = Math.max(1, Math.floor(ctx.opts.jobs / busy));
  const n = perTenant * busy;
  const tenants = Array.from({ length: busy }, (_, i) => `b${String(i).padStart(3, '0')}`);
  const sub = subConfig(ctx, 'prelay', { tenants: [SOLO, ...tenants], queues: RELAY_QUEUES, stages: relayStages(ctx) });
  const stages = new Map<string, LoadedStage>();
  for (const name of ['relay_ab', 'relay_ba']) stages.set(name, await loadStage(sub.config, name));
  const metas: StageMetadata[] = [...stages.values()].map((s) => s.metadata);
  const tenantPrefetch = sub.config.stages.get('relay_ab')?.tenantPrefetch ?? 0;
  progress(
    `pooled relay: ${fmt(n)} jobs per round, pooled over ${busy} tenants (${fmt(perTenant)} each, tenant_prefetch ${tenantPrefetch}) ` +
      `vs one tenant; concurrency = prefetch = ${ctx.opts.prefetch}, ${bodySize(ctx.opts.size)} B bodies (prefix ${sub.config.prefix})`,
  );
  const queues = (tenant: string): [string, string] => [sub.names.queue('relay_a', tenant), sub.names.queue('relay_b', tenant)];
  /** Every tenant of a side holds `count` in relay_a (forwards) or relay_b. */
  const holding = (side: string[], count: number, inB: boolean): Record<string, number> =>
    Object.fromEntries(side.flatMap((tenant) => queues(tenant).map((q, i) => [q, (i === 1) === inB ? count : 0])));
  const rounds: Round[] = [];
  try {
    await withTimeout(declareTopologyOnce(sub.config, provisionTopology(sub.config, metas), ctx.log), 120_000, 'declaring the topology');
    const fillOptions = { args: [padFor(ctx.opts.size, 'relay_a', true)], withParent: true, timeoutMs: Math.max(60_000, 2 * n) };
    await fillTenants(ctx, sub, 'relay_a', [[SOLO, n]], fillOptions);
    await fillTenants(
      ctx,
      sub,
      'relay_a',
      tenants.map((t) => [t, perTenant] as const),
      fillOptions,
    );
    await sleep(SETTLE_MS);
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
      // Odd rounds move relay_a -> relay_b, even ones back: no refill.
      const forwards = r % 2 === 1;
      const stage = stages.get(forwards ? 'relay_ab' : 'relay_ba') as LoadedStage;
      let what = `pooled relay round ${r} (1 tenant)`;
      rounds.push(await relayRound(ctx, sub, stage, [SOLO], n, what, false));
      await expectCounts(ctx.opts.url, holding([SOLO], n, forwards), what);
      await sleep(SETTLE_MS);
      what = `pooled relay round ${r} (${busy} tenants pooled)`;
      rounds.push(await relayRound(ctx, sub, stage, tenants, n, what, true));
      await expectCounts(ctx.opts.url, holding(tenants, perTenant, forwards), what, 60_000);
      await sleep(SETTLE_MS);
    }
  } finally {
    await withTimeout(dropSubConfig(ctx, sub), 120_000, `deleting ${sub.config.prefix}`).catch((err: Error) =>
      progress(`  warning: ${err.message} (the cleanup tries again at the end)`),
    );
  }
  const relay = summarise(
    'pooled',
    `relay, ${busy} tenants in one pooled process (stagecoach column) vs 1 tenant (baseline column)`,
    rounds,
  );
  return { relay, tenantPrefetch };
}

/**
 * One side's round: the stage for `tenants`, pooled or (one tenant) a plain group. The handlers
 * wait (probe.gateRelay) until every tenant consumes (start() resolved), and the round is timed
 * from then until every job completed: a pooled process attaches its tenants 16 at a time, which
 * on 2 busy cores takes as long as a whole round (the first tenants would run alone meanwhile).
 * Both sides hold the same deliveries when the gate opens: the single tenant its `prefetch`, the
 * pooled tenants `tenant_prefetch` (= prefetch / tenants) each.
 */
async function relayRound(
  ctx: BenchContext,
  sub: SubConfig,
  stage: LoadedStage,
  tenants: string[],
  n: number,
  what: string,
  pooled: boolean,
): Promise<Round> {
  probe.reset();
  const instances = tenants.map((tenant) => ({ stage, tenant }));
  const group = pooled
    ? new StageGroup(sub.config, instances, ctx.log, { pooled: { stage } })
    : new StageGroup(sub.config, instances, ctx.log);
  const completed = (): number => group.runners.reduce((sum, runner) => sum + runner.stats.completed, 0);
  probe.gateRelay();
  try {
    const started = performance.now();
    await withTimeout(group.start(), 60_000, `${what}: starting`);
    const attachSeconds = (performance.now() - started) / 1000;
    if (completed() !== 0) throw new Error(`${what}: jobs completed behind the gate`);
    const start: Mark = { at: performance.now(), cpu: cpuNow() };
    probe.openRelayGate();
    const end = await waitDone(ctx, what, n, completed, group.failed);
    const stats = group.runners.map((r) => r.stats);
    if (stats.some((s) => s.deadLettered + s.retried + s.discarded > 0)) throw new Error(`${what}: jobs failed in the stage`);
    progress(`    (${tenants.length} tenant(s) consuming ${attachSeconds.toFixed(1)} s after start(), then timed)`);
    return round(pooled ? 'stagecoach' : 'baseline', n, start, end);
  } finally {
    probe.openRelayGate();
    await withTimeout(group.stop(), 60_000, `${what}: stopping`).catch((err: Error) => progress(`  warning: ${err.message}`));
  }
}

export function pooledTargets(result: PooledResult): Array<[string, boolean, string]> {
  return [
    [
      `pooled RSS ${fmt(result.many.tenants)} / 1 tenant <= ${POOLED_TARGETS.rssRatio}x`,
      result.rssRatio <= POOLED_TARGETS.rssRatio,
      `${result.rssRatio.toFixed(2)}x`,
    ],
    [
      `pooled relay ${result.busyTenants} tenants / 1 tenant >= ${POOLED_TARGETS.relayRatio}x`,
      result.relay.ratio >= POOLED_TARGETS.relayRatio,
      `${result.relay.ratio.toFixed(2)}x`,
    ],
  ];
}
