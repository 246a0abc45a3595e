/**
 * Scenario `fairness`: how one pooled stage process (`run --tenants`) shares its `concurrency`
 * slots between tenants (src/runner/intake/fair-share.ts). The handler of the `fair` / `weighted` stages
 * takes `HANDLER_MS` (a timer: no CPU) and records which tenant's job finished when
 * (`probe.completions`); the stages run in this process. Every backlog is published (confirm
 * channel, thousands in flight) before the pooled process starts, so all are queued.
 *
 * - Flood: one tenant with `--flood` (50,000) jobs and 99 with 200 each, equal weights,
 *   concurrency 16. Jain's fairness index of the per-tenant throughput while all 100 tenants
 *   have work (from the last tenant's first completion to the first tenant's last one; target
 *   >= 0.95), and how much of the flood was done when the quiet tenants' last job finished
 *   (target: under 25%). Stopped once the quiet tenants are done (the rest of the flood is
 *   deleted with the queues).
 * - Weights: two tenants of weight 3 and 1, `--flood`/10 jobs each, concurrency 8, a 5 ms handler
 *   (see WEIGHTS_HANDLER_MS): the ratio of their completions while both have work (target:
 *   within 10% of 3). Twice: with the default
 *   tenant_prefetch (prefetch, concurrency + 10 = 18: three times the weight-3 tenant's 6 slots, but
 *   its deliveries in transit count against it too) and with 8 x concurrency (64).
 *
 * The handlers wait (probe.openFairGate) until every tenant consumes: a pooled process attaches
 * its tenants 16 at a time, and without the gate the first ones run alone meanwhile (100 tenants
 * take a few seconds on 2 busy cores), which measures attach order, not the share.
 */
import { loadStage, StageGroup, type LoadedStage } from '../src/index.js';
import { declareTopologyOnce, provisionTopology } from '../src/wire.js';
import { probe } from './bench-stages.js';
import { fmt, poll, progress, withTimeout, sleep, type BenchContext } from './common.js';
import { dropSubConfig, fillTenants, subConfig, type SubConfig } from './sub-prefix.js';

/** How long each job's handler takes, ms (a timer). */
const HANDLER_MS = 1;
/**
 * The same for the weights: long enough that the 8 slots, not the broker's delivery of one queue
 * (a single Erlang process, a few thousand a second on 2 busy cores), limit the throughput:
 * otherwise the weight-3 tenant cannot get deliveries fast enough to use its slots, and the
 * share (work-conserving) rightly gives them to the other one.
 */
const WEIGHTS_HANDLER_MS = 5;
const QUIET_TENANTS = 99;
const QUIET_JOBS = 200;
const FLOOD_CONCURRENCY = 16;
const WEIGHTS_CONCURRENCY = 8;
/** The emitting weights round: a 2 ms handler that awaits its emit, concurrency 20. */
const EMIT_HANDLER_MS = 2;
const EMIT_CONCURRENCY = 20;
const WEIGHTS = { heavy: 3, light: 1 };
/** The weights run again with this tenant_prefetch (x concurrency): deliveries always at hand. */
const DEEP_PREFETCH_FACTOR = 8;
/** After the quiet tenants are done, the flood runs alone this long (its solo rate). */
const TAIL_MS = 1500;

export const FAIRNESS_TARGETS = { jain: 0.95, floodShare: 0.25, weightTolerance: 0.1 };

export interface FloodResult {
  /** Seconds from start() until every tenant consumed (the handlers wait until then). */
  startSeconds: number;
  floodJobs: number;
  quietTenants: number;
  quietJobs: number;
  concurrency: number;
  tenantPrefetch: number;
  /** The window while all tenants had work, seconds. */
  windowSeconds: number;
  /** Jain's index of per-tenant completions in that window (1 = perfectly equal). */
  jain: number;
  /** In the window: the flood's completions and the quiet tenants' mean, min and max. */
  floodInWindow: number;
  quietMeanInWindow: number;
  quietMinInWindow: number;
  quietMaxInWindow: number;
  /** Seconds from the first completion until the quiet tenants' last job finished. */
  quietDoneSeconds: number;
  /** Flood jobs finished by then. */
  floodDoneAtQuietDone: number;
  /** floodDoneAtQuietDone / floodJobs. Target < 0.25. */
  floodShareAtQuietDone: number;
  /** Flood jobs finished before the last tenant's first one (attach order). */
  floodBeforeAllStarted: number;
  /** Every tenant's jobs/s while all had work, and the flood's alone afterwards. */
  jobsPerSecondAll: number;
  jobsPerSecondFloodAlone: number;
  /** Completions per 250 ms from the first one: flood and quiet tenants. */
  timeline: Array<{ ms: number; flood: number; quiet: number }>;
}

export interface WeightsResult {
  handlerMs: number;
  jobsEach: number;
  concurrency: number;
  tenantPrefetch: number;
  windowSeconds: number;
  heavyInWindow: number;
  lightInWindow: number;
  /** heavyInWindow / lightInWindow. Target 3 within 10%. */
  ratio: number;
}

export interface FairnessResult {
  scenario: 'fairness';
  handlerMs: number;
  flood: FloodResult;
  /** Weights 3:1 with the default tenant_prefetch (prefetch, concurrency + 10). */
  weights: WeightsResult;
  /** The same with tenant_prefetch = 8 x concurrency. */
  weightsDeep: WeightsResult;
  /** Weights 3:1 with a 2 ms handler that emits (concurrency 20, default tenant_prefetch). */
  weightsEmit: WeightsResult;
}

export async function benchFairness(ctx: BenchContext): Promise<FairnessResult> {
  const floodJobs = ctx.opts.flood;
  const quiet = Array.from({ length: QUIET_TENANTS }, (_, i) => `q${String(i + 1).padStart(2, '0')}`);
  const sub = subConfig(ctx, 'fair', {
    tenants: ['flood', ...quiet, { name: 'heavy', weight: WEIGHTS.heavy }, { name: 'light', weight: WEIGHTS.light }],
    queues: {
      fair_in: { scope: 'tenant' },
      weighted_in: { scope: 'tenant' },
      weighted_deep_in: { scope: 'tenant' },
      weighted_emit_in: { scope: 'tenant' },
      weighted_emit_out: { scope: 'tenant' },
    },
    stages: {
      fair: { module: './bench-stages.js', concurrency: FLOOD_CONCURRENCY },
      weighted: { module: './bench-stages.js', concurrency: WEIGHTS_CONCURRENCY },
      weighted_deep: {
        module: './bench-stages.js',
        concurrency: WEIGHTS_CONCURRENCY,
        tenant_prefetch: DEEP_PREFETCH_FACTOR * WEIGHTS_CONCURRENCY,
      },
      weighted_emit: { module: './bench-stages.js', concurrency: EMIT_CONCURRENCY },
    },
  });
  try {
    const fair = await loadStage(sub.config, 'fair');
    const weighted = await loadStage(sub.config, 'weighted');
    const deep = await loadStage(sub.config, 'weighted_deep');
    const emitting = await loadStage(sub.config, 'weighted_emit');
    await withTimeout(
      declareTopologyOnce(
        sub.config,
        provisionTopology(sub.config, [fair.metadata, weighted.metadata, deep.metadata, emitting.metadata]),
        ctx.log,
      ),
      120_000,
      'declaring the fairness topology',
    );
    const flood = await floodRound(ctx, sub, fair, floodJobs, quiet);
    const jobsEach = Math.max(1000, Math.round(floodJobs / 10));
    const weights = await weightsRound(ctx, sub, weighted, jobsEach);
    const weightsDeep = await weightsRound(ctx, sub, deep, jobsEach);
    const weightsEmit = await weightsRound(ctx, sub, emitting, jobsEach, EMIT_HANDLER_MS);
    return { scenario: 'fairness', handlerMs: HANDLER_MS, flood, weights, weightsDeep, weightsEmit };
  } finally {
    await withTimeout(dropSubConfig(ctx, sub), 120_000, `deleting ${sub.config.prefix}`).catch((err: Error) =>
      progress(`  warning: ${err.message} (the cleanup tries again at the end)`),
    );
  }
}

/**
 * Starts a pooled group of `stage` over `tenants`, opens the handlers' gate once every tenant
 * consumes, waits for `done` (and `tailMs` more), stops it.
 * @returns the seconds start() took: until every tenant consumed.
 */
async function runPooled(
  ctx: BenchContext,
  sub: SubConfig,
  stage: LoadedStage,
  tenants: string[],
  what: string,
  done: (group: StageGroup) => boolean,
  timeoutMs: number,
  tailMs = 0,
): Promise<number> {
  probe.reset();
  const group = new StageGroup(
    sub.config,
    tenants.map((tenant) => ({ stage, tenant })),
    ctx.log,
    { pooled: { stage } },
  );
  try {
    const started = performance.now();
    await withTimeout(group.start(), 60_000, `${what}: starting`);
    const startSeconds = (performance.now() - started) / 1000;
    // Every tenant consumes: the handlers may start (see probe.openFairGate).
    probe.openFairGate();
    const finished = poll(() => done(group), timeoutMs, 20);
    const failed = group.failed.then((err) => Promise.reject(new Error(`${what} failed: ${err.message}`)));
    if (!(await Promise.race([finished, failed]))) {
      const counts = group.runners.map((r) => `${r.tenant ?? ''}=${r.stats.completed}`).join(' ');
      throw new Error(`${what} stalled after ${(timeoutMs / 1000).toFixed(0)} s: completed ${counts.slice(0, 800)}`);
    }
    if (tailMs > 0) await sleep(tailMs);
    const stats = group.runners.map((r) => r.stats);
    if (stats.some((s) => s.deadLettered + s.retried + s.discarded > 0)) throw new Error(`${what}: jobs failed in the stage`);
    return startSeconds;
  } finally {
    await withTimeout(group.stop(), 60_000, `${what}: stopping`).catch((err: Error) => progress(`  warning: ${err.message}`));
  }
}

interface Span {
  first: number;
  last: number;
  count: number;
}

/** Each tenant's first and last completion, and how many, from probe.completions. */
function spans(): Map<string, Span> {
  const { tenants, at } = probe.completions;
  const result = new Map<string, Span>();
  for (let i = 0; i < tenants.length; i++) {
    const tenant = tenants[i] as string;
    const t = at[i] as number;
    const span = result.get(tenant);
    if (span === undefined) result.set(tenant, { first: t, last: t, count: 1 });
    else {
      span.last = Math.max(span.last, t);
      span.count++;
    }
  }
  return result;
}

/** Completions of each tenant within [from, to]. */
function countsIn(from: number, to: number): Map<string, number> {
  const { tenants, at } = probe.completions;
  const counts = new Map<string, number>();
  for (let i = 0; i < tenants.length; i++) {
    const t = at[i] as number;
    if (t < from || t > to) continue;
    const tenant = tenants[i] as string;
    counts.set(tenant, (counts.get(tenant) ?? 0) + 1);
  }
  return counts;
}

/** Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 when all are equal, 1/n when one has all. */
export function jain(values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  const squares = values.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 1 : (sum * sum) / (values.length * squares);
}

async function floodRound(ctx: BenchContext, sub: SubConfig, stage: LoadedStage, floodJobs: number, quiet: string[]): Promise<FloodResult> {
  const quietTotal = quiet.length * QUIET_JOBS;
  const tenantPrefetch = sub.config.stages.get('fair')?.tenantPrefetch ?? 0;
  progress(
    `fairness (flood): 'flood' ${fmt(floodJobs)} jobs, ${quiet.length} quiet tenants x ${QUIET_JOBS}, equal weights, concurrency ${FLOOD_CONCURRENCY}, ` +
      `tenant_prefetch ${tenantPrefetch}, ${HANDLER_MS} ms handler (prefix ${sub.config.prefix})`,
  );
  await fillTenants(
    ctx,
    sub,
    'fair_in',
    [['flood', floodJobs], ...quiet.map((t) => [t, QUIET_JOBS] as const)],
    // Non-persistent: only to fill it faster; the stage sees the same jobs.
    { args: [HANDLER_MS], persistent: false, window: 5000, timeoutMs: Math.max(60_000, 2 * (floodJobs + quietTotal)) },
  );
  const quietSet = new Set(quiet);
  const quietDone = (group: StageGroup): number =>
    group.runners.reduce((sum, r) => sum + (r.tenant !== undefined && quietSet.has(r.tenant) ? r.stats.completed : 0), 0);
  const startSeconds = await runPooled(
    ctx,
    sub,
    stage,
    ['flood', ...quiet],
    'fairness (flood)',
    (group) => quietDone(group) >= quietTotal,
    Math.max(ctx.opts.roundTimeoutMs, 120_000),
    TAIL_MS,
  );

  const all = spans();
  const floodSpan = all.get('flood');
  const quietSpans = quiet.map((t) => all.get(t));
  if (floodSpan === undefined || quietSpans.some((s) => s === undefined || s.count !== QUIET_JOBS)) {
    throw new Error(`fairness (flood): not every tenant finished its jobs: ${JSON.stringify([...all].slice(0, 5))}`);
  }
  const qs = quietSpans as Span[];
  const firstEver = Math.min(floodSpan.first, ...qs.map((s) => s.first));
  const from = Math.max(floodSpan.first, ...qs.map((s) => s.first));
  const to = Math.min(...qs.map((s) => s.last));
  const quietDoneAt = Math.max(...qs.map((s) => s.last));
  const counts = countsIn(from, to);
  const perTenant = ['flood', ...quiet].map((t) => counts.get(t) ?? 0);
  const quietCounts = perTenant.slice(1);
  const { tenants, at } = probe.completions;
  let floodByQuietDone = 0;
  let floodBeforeAll = 0;
  let floodAfter = 0;
  const tailFrom = quietDoneAt + 100;
  let tailTo = tailFrom;
  const timeline: FloodResult['timeline'] = [];
  for (let i = 0; i < tenants.length; i++) {
    const t = at[i] as number;
    const isFlood = tenants[i] === 'flood';
    if (isFlood && t <= quietDoneAt) floodByQuietDone++;
    if (isFlood && t < from) floodBeforeAll++;
    if (isFlood && t >= tailFrom) {
      floodAfter++;
      tailTo = Math.max(tailTo, t);
    }
    if (t <= quietDoneAt) {
      const bucket = Math.floor((t - firstEver) / 250);
      while (timeline.length <= bucket) timeline.push({ ms: timeline.length * 250, flood: 0, quiet: 0 });
      const slot = timeline[bucket] as { flood: number; quiet: number };
      if (isFlood) slot.flood++;
      else slot.quiet++;
    }
  }
  const windowSeconds = (to - from) / 1000;
  if (windowSeconds <= 0)
    throw new Error(`fairness (flood): a quiet tenant finished before the last one started (${windowSeconds.toFixed(2)} s)`);
  const result: FloodResult = {
    startSeconds,
    floodJobs,
    quietTenants: quiet.length,
    quietJobs: QUIET_JOBS,
    concurrency: FLOOD_CONCURRENCY,
    tenantPrefetch,
    windowSeconds,
    jain: jain(perTenant),
    floodInWindow: perTenant[0] as number,
    quietMeanInWindow: quietCounts.reduce((a, b) => a + b, 0) / quietCounts.length,
    quietMinInWindow: Math.min(...quietCounts),
    quietMaxInWindow: Math.max(...quietCounts),
    quietDoneSeconds: (quietDoneAt - firstEver) / 1000,
    floodDoneAtQuietDone: floodByQuietDone,
    floodShareAtQuietDone: floodByQuietDone / floodJobs,
    floodBeforeAllStarted: floodBeforeAll,
    jobsPerSecondAll: perTenant.reduce((a, b) => a + b, 0) / Math.max(windowSeconds, 1e-3),
    jobsPerSecondFloodAlone: tailTo > tailFrom ? floodAfter / ((tailTo - tailFrom) / 1000) : 0,
    timeline,
  };
  progress(`    every tenant consuming ${startSeconds.toFixed(1)} s after start()`);
  progress(
    `    all ${quiet.length + 1} busy for ${windowSeconds.toFixed(2)} s (${fmt(result.jobsPerSecondAll)} jobs/s): flood ${result.floodInWindow}, ` +
      `quiet mean ${result.quietMeanInWindow.toFixed(1)} (min ${result.quietMinInWindow}, max ${result.quietMaxInWindow}); Jain ${result.jain.toFixed(3)}`,
  );
  progress(
    `    quiet tenants done ${result.quietDoneSeconds.toFixed(2)} s after the first job, the flood ${fmt(floodByQuietDone)} done by then ` +
      `(${(100 * result.floodShareAtQuietDone).toFixed(1)}%; ${fmt(floodBeforeAll)} before every tenant had started); flood alone afterwards ${fmt(result.jobsPerSecondFloodAlone)} jobs/s`,
  );
  return result;
}

async function weightsRound(
  ctx: BenchContext,
  sub: SubConfig,
  stage: LoadedStage,
  jobsEach: number,
  handlerMs = WEIGHTS_HANDLER_MS,
): Promise<WeightsResult> {
  const concurrency = sub.config.stages.get(stage.metadata.name)?.concurrency ?? WEIGHTS_CONCURRENCY;
  const tenantPrefetch = sub.config.stages.get(stage.metadata.name)?.tenantPrefetch ?? 0;
  progress(
    `fairness (weights): 'heavy' weight ${WEIGHTS.heavy} and 'light' weight ${WEIGHTS.light}, ${fmt(jobsEach)} jobs each, concurrency ${concurrency}, ` +
      `tenant_prefetch ${tenantPrefetch}, ${handlerMs} ms handler`,
  );
  await fillTenants(
    ctx,
    sub,
    stage.metadata.input,
    [
      ['heavy', jobsEach],
      ['light', jobsEach],
    ],
    { args: [handlerMs], persistent: false, window: 5000, timeoutMs: Math.max(60_000, 4 * jobsEach) },
  );
  await runPooled(
    ctx,
    sub,
    stage,
    ['heavy', 'light'],
    `fairness (weights, tenant_prefetch ${tenantPrefetch})`,
    (group) => group.runners.some((r) => r.stats.completed >= jobsEach),
    Math.max(ctx.opts.roundTimeoutMs, 120_000),
  );
  const all = spans();
  const heavy = all.get('heavy');
  const light = all.get('light');
  if (heavy === undefined || light === undefined) throw new Error('fairness (weights): a tenant never ran');
  const from = Math.max(heavy.first, light.first);
  // The first of the two to run out ends the window (its last jobs run with fewer waiting).
  const to = Math.min(
    heavy.count >= jobsEach ? heavy.last : Number.POSITIVE_INFINITY,
    light.count >= jobsEach ? light.last : Number.POSITIVE_INFINITY,
  );
  const counts = countsIn(from, to);
  const heavyIn = counts.get('heavy') ?? 0;
  const lightIn = counts.get('light') ?? 0;
  const result: WeightsResult = {
    handlerMs: handlerMs,
    jobsEach,
    concurrency,
    tenantPrefetch,
    windowSeconds: (to - from) / 1000,
    heavyInWindow: heavyIn,
    lightInWindow: lightIn,
    ratio: heavyIn / Math.max(1, lightIn),
  };
  progress(
    `    both busy for ${result.windowSeconds.toFixed(2)} s: heavy ${fmt(heavyIn)}, light ${fmt(lightIn)}, ratio ${result.ratio.toFixed(2)} (target ${WEIGHTS.heavy / WEIGHTS.light})`,
  );
  return result;
}

export function fairnessTargets(result: FairnessResult): Array<[string, boolean, string]> {
  const target = WEIGHTS.heavy / WEIGHTS.light;
  return [
    [
      `fairness: Jain's index, ${result.flood.quietTenants + 1} busy tenants >= ${FAIRNESS_TARGETS.jain}`,
      result.flood.jain >= FAIRNESS_TARGETS.jain,
      result.flood.jain.toFixed(3),
    ],
    [
      `fairness: quiet tenants done before ${100 * FAIRNESS_TARGETS.floodShare}% of the flood`,
      result.flood.floodShareAtQuietDone < FAIRNESS_TARGETS.floodShare,
      `${(100 * result.flood.floodShareAtQuietDone).toFixed(1)}%`,
    ],
    ...[result.weights, result.weightsDeep, result.weightsEmit].map((w): [string, boolean, string] => [
      `fairness: weights ${WEIGHTS.heavy}:${WEIGHTS.light} within ${100 * FAIRNESS_TARGETS.weightTolerance}% (tenant_prefetch ${w.tenantPrefetch})`,
      Math.abs(w.ratio - target) / target <= FAIRNESS_TARGETS.weightTolerance,
      `${w.ratio.toFixed(2)}:1`,
    ]),
  ];
}
