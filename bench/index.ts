/**
 * `npm run bench`: stagecoach against hand-written amqplib, in the same run against the same
 * broker. Scenarios: publish, relay, pipeline (throughput, baseline and stagecoach rounds
 * alternated, the median reported) and memory (a stage's peak RSS with a small and a large
 * backlog waiting) and tenants (1,000 tenants of the example pipeline: provision, plan, one
 * `--all-tenants` process's start, memory, idle CPU and latency), pooled (one process serving
 * many tenants: RSS for 1,000 idle tenants vs 1, relay throughput over 100 busy tenants vs 1) and
 * fairness (a flood against quiet tenants, weights 3:1). Everything is declared under a random
 * prefix and deleted at the end, on failure and on SIGINT/SIGTERM too. See bench/README.md.
 */
import os from 'node:os';
import { createLogger, loadAllStages, type CompiledConfig, type StageMetadata } from '../src/index.js';
import { BrokerNames, declareTopologyOnce, provisionTopology } from '../src/wire.js';
import { PROVISION_LANES } from '../src/broker/declare-topology.js';
import { teardown } from '../src/testing/index.js';
import { syncQueueSettings } from '../src/plan/queue-settings.js';
import { managementClientOf } from '../src/broker-management/management-client.js';
import {
  benchConfig,
  bodySize,
  fmt,
  parseOptions,
  progress,
  withTimeout,
  type BenchContext,
  type BenchOptions,
  type ThroughputResult,
} from './common.js';
import { benchMemory, children, type MemoryResult } from './memory.js';
import { BASELINE_MAX_TENANTS, benchTenants, cleanupTenants, tenantsTargets, type TenantsResult } from './tenants.js';
import { benchPooled, pooledTargets, type PooledResult } from './pooled.js';
import { benchFairness, fairnessTargets, type FairnessResult } from './fairness.js';
import { cleanupSubConfigs } from './sub-prefix.js';
import { benchPipeline, benchPublish, benchQueueTypes, benchRelay } from './throughput.js';
import { benchTracking } from './tracking.js';
import { benchEvents, benchMiddleware } from './hooks.js';
import { benchJobState } from './jobstate.js';
import { benchHttpRelay } from './http-relay.js';
import { benchLimits } from './limits.js';
import { benchPayloads, cleanupPayloadStore, type PayloadsResult } from './payloads.js';
import { benchPeers, cleanupPeers, renderPeers, type PeersResult } from './peers.js';
import { benchWorkflows } from './workflows.js';
import { benchSchedules, type SchedulesResult } from './schedules.js';

let cleanup: (() => Promise<void>) | undefined;
let interrupted = false;

async function main(): Promise<number> {
  let opts: BenchOptions;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n(--help for the options)\n`);
    return 2;
  }
  const { raw, source, config } = benchConfig(opts);
  const log = createLogger({ component: 'bench' }, process.env.LOG_LEVEL ?? 'warn');
  const loaded = await loadAllStages(config);
  const metas: StageMetadata[] = loaded.map((s) => s.metadata);
  const ctx: BenchContext = {
    opts,
    config,
    raw,
    source,
    names: new BrokerNames(config.prefix),
    stages: new Map(loaded.map((s) => [s.metadata.name, s])),
    log,
  };
  let cleaning: Promise<void> | undefined;
  /**
   * The policy puts, which go on after their wait timed out on a busy broker: the teardown waits
   * for them, or it would delete the policies before the last were put and leave those behind.
   */
  let policiesPut: Promise<unknown> | undefined;
  // One teardown, awaited by whoever asks (the normal end, a failure, a signal).
  cleanup = () =>
    (cleaning ??= (async () => {
      for (const child of children) child.kill('SIGKILL');
      await cleanupPeers().catch((err: Error) => progress(`bench: stopping the peers' redis-server failed (${err.message})`));
      await withTimeout(policiesPut?.catch(() => undefined) ?? Promise.resolve(), 120_000, 'the policy puts').catch((err: Error) =>
        progress(`bench: ${err.message}; its policies may be left behind`),
      );
      progress(`cleaning up: deleting every queue and exchange under prefix ${config.prefix}`);
      await withTimeout(teardown(config, metas), 60_000, 'teardown').catch((err: Error) =>
        progress(`bench: cleanup failed (${err.message}); delete what starts with "${config.prefix}." by hand`),
      );
      await withTimeout(cleanupTenants(ctx), 120_000, 'tenants teardown').catch((err: Error) =>
        progress(`bench: cleanup failed (${err.message}); delete what starts with "${config.prefix}-" by hand`),
      );
      await withTimeout(cleanupSubConfigs(ctx), Math.max(300_000, opts.tenants * 100), 'tenants/pooled/fairness teardown').catch(
        (err: Error) => progress(`bench: cleanup failed (${err.message}); delete what starts with "${config.prefix}-" by hand`),
      );
      await withTimeout(cleanupPayloadStore(ctx), 60_000, 'payload store teardown').catch((err: Error) =>
        progress(`bench: cleanup failed (${err.message}); delete the payload store ${JSON.stringify(config.payloads.store)} by hand`),
      );
    })());

  const size = bodySize(opts.size);
  if (size !== opts.size) progress(`bench: --size ${opts.size} is below the bare envelope's size; jobs are ${size} B`);
  const started = performance.now();
  const loadBefore = os.loadavg();
  progress(
    `stagecoach bench: prefix ${config.prefix}, ${size} B jobs, prefetch ${opts.prefetch}, ${fmt(opts.jobs)} jobs (pipeline ${fmt(opts.pipelineJobs)}), ` +
      `${opts.rounds} rounds per side, ${os.cpus().length} CPUs, node ${process.version}, load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
  );
  const results: Results = { throughput: [] };
  try {
    await withTimeout(declareTopologyOnce(config, provisionTopology(config, metas), log), 60_000, 'declaring the topology');
    // The policies too, as `provision` puts them: queue settings and the classic queue version.
    policiesPut = syncQueueSettings(config, metas, managementClientOf(config), { removeStale: false });
    await withTimeout(policiesPut, 60_000, 'putting the policies').catch((err: Error) =>
      progress(`bench: queue policies not put (${err.message}): classic queues run on the broker's default version`),
    );
    if (opts.only.has('publish')) results.throughput.push(await benchPublish(ctx));
    if (opts.only.has('relay')) results.throughput.push(await benchRelay(ctx));
    if (opts.only.has('pipeline')) results.throughput.push(await benchPipeline(ctx));
    if (opts.only.has('memory')) results.memory = await benchMemory(ctx);
    if (opts.only.has('quorum')) results.throughput.push(await benchQueueTypes(ctx));
    if (opts.only.has('tenants')) results.tenants = await benchTenants(ctx);
    if (opts.only.has('pooled')) {
      results.pooled = await benchPooled(ctx);
      results.throughput.push(results.pooled.relay);
    }
    if (opts.only.has('fairness')) results.fairness = await benchFairness(ctx);
    if (opts.only.has('tracking')) results.throughput.push(...(await benchTracking(ctx)));
    if (opts.only.has('jobstate')) results.throughput.push(...(await benchJobState(ctx)));
    if (opts.only.has('http')) results.throughput.push(...(await benchHttpRelay(ctx)));
    if (opts.only.has('limits')) results.throughput.push(...(await benchLimits(ctx)));
    if (opts.only.has('middleware')) results.throughput.push(await benchMiddleware(ctx));
    if (opts.only.has('events')) results.throughput.push(await benchEvents(ctx));
    if (opts.only.has('peers')) results.peers = await benchPeers(ctx);
    if (opts.only.has('workflows')) results.throughput.push(...(await benchWorkflows(ctx)));
    if (opts.only.has('schedules')) results.schedules = await benchSchedules(ctx, opts.scheduleTenants);
    if (opts.only.has('payloads')) {
      results.payloads = await benchPayloads(ctx);
      results.throughput.push(results.payloads.large, results.payloads.small);
    }
  } catch (err) {
    if (!interrupted) progress(`bench: FAILED: ${(err as Error).message}`);
    await cleanup();
    return interrupted ? 130 : 1;
  }
  await cleanup();
  const seconds = (performance.now() - started) / 1000;
  const loadAfter = os.loadavg();
  const table = renderTable(results, opts, config, size);
  if (opts.json) {
    process.stderr.write(table);
    process.stdout.write(
      `${JSON.stringify({ options: { ...opts, only: [...opts.only] }, prefix: config.prefix, bodyBytes: size, seconds, loadavg: { before: loadBefore, after: loadAfter }, ...results }, null, 2)}\n`,
    );
  } else {
    process.stdout.write(table);
  }
  progress(
    `done in ${seconds.toFixed(0)} s; load average now ${loadAfter.map((l) => l.toFixed(2)).join(' ')} (other processes on the machine skew the numbers)`,
  );
  return 0;
}

interface Results {
  throughput: ThroughputResult[];
  memory?: MemoryResult;
  tenants?: TenantsResult;
  pooled?: PooledResult;
  fairness?: FairnessResult;
  payloads?: PayloadsResult;
  peers?: PeersResult;
  schedules?: SchedulesResult;
}

function renderTable(results: Results, opts: BenchOptions, config: CompiledConfig, size: number): string {
  const lines: string[] = [];
  lines.push('');
  // The job settings mean nothing to the tenants scenario alone.
  if (results.throughput.length > 0 || results.memory) {
    lines.push(
      `${size} B JSON jobs, persistent, publisher confirms, input acked after output confirm; prefetch ${opts.prefetch}; median of ${opts.rounds} rounds`,
    );
  }
  if (results.throughput.length > 0) {
    const rows = [
      ['scenario', 'detail', 'baseline jobs/s', 'stagecoach jobs/s', 'ratio', 'client CPU µs/job base / sc', 'broker CPU µs/job base / sc'],
    ];
    for (const r of results.throughput) {
      rows.push([
        r.scenario,
        r.detail,
        fmt(r.baseline),
        fmt(r.stagecoach),
        r.ratio.toFixed(2),
        `${r.baselineCpuUsPerJob.toFixed(0)} / ${r.stagecoachCpuUsPerJob.toFixed(0)}`,
        r.baselineBrokerCpuUsPerJob === undefined || r.stagecoachBrokerCpuUsPerJob === undefined
          ? '-'
          : `${r.baselineBrokerCpuUsPerJob.toFixed(0)} / ${r.stagecoachBrokerCpuUsPerJob.toFixed(0)}`,
      ]);
    }
    lines.push(...grid(rows, [false, false, true, true, true, true, true]));
  }
  if (results.memory) {
    const m = results.memory;
    const rows = [
      ['memory', 'backlog', 'held', 'peak RSS MiB', 'RSS holding MiB', 'heap MiB'],
      ...[m.small, m.large].map((s) => [
        'stage',
        fmt(s.backlog),
        fmt(s.held),
        s.peakRssMiB.toFixed(1),
        s.sampledRssMiB.toFixed(1),
        s.heapUsedMiB.toFixed(1),
      ]),
      [
        'ratio',
        `${fmt(m.large.backlog)}/${fmt(m.small.backlog)}`,
        '',
        m.ratio.toFixed(2),
        (m.large.sampledRssMiB / m.small.sampledRssMiB).toFixed(2),
        (m.large.heapUsedMiB / m.small.heapUsedMiB).toFixed(2),
      ],
    ];
    lines.push('');
    lines.push(...grid(rows, [false, true, true, true, true, true]));
  }
  if (results.tenants) {
    const t = results.tenants;
    const rows = [
      ['tenants (example pipeline)', 'tenants', 'exchanges', 'queues', 'bindings', 'baseline s', 'queues alone s', 'provision s', 'plan s'],
      [
        'provision, then plan',
        fmt(t.tenants),
        fmt(t.exchanges),
        fmt(t.queues),
        fmt(t.bindings),
        t.baselineSeconds === undefined ? '-' : t.baselineSeconds.toFixed(1),
        t.queuesAloneSeconds.toFixed(1),
        t.provisionSeconds.toFixed(1),
        `${t.planSeconds.toFixed(1)} (${t.planChanges} changes)`,
      ],
    ];
    lines.push('');
    lines.push(...grid(rows, [false, true, true, true, true, true, true, true, true]));
    const pooledRows = [
      [
        'converter process',
        'tenants',
        'serving all after s',
        'RSS MiB',
        'peak RSS MiB',
        'heap MiB',
        'idle CPU % of a core',
        'latency p50 / p95 ms',
      ],
      ...[t.one, t.pooled].map((s, i) => [
        i === 0 ? '--tenants t00000' : '--all-tenants',
        fmt(s.tenants),
        `${s.processSeconds.toFixed(1)} (start() ${s.startSeconds.toFixed(1)})`,
        s.rssMiB.toFixed(1),
        s.peakRssMiB.toFixed(1),
        s.heapUsedMiB.toFixed(1),
        s.idleCpuPercent.toFixed(1),
        i === 0 ? '' : `${t.latencyP50Ms.toFixed(1)} / ${t.latencyP95Ms.toFixed(1)}`,
      ]),
      ['ratio', `${fmt(t.pooled.tenants)}/1`, '', t.rssRatio.toFixed(2), (t.pooled.peakRssMiB / t.one.peakRssMiB).toFixed(2), '', '', ''],
    ];
    lines.push('');
    lines.push(...grid(pooledRows, [false, true, true, true, true, true, true, true]));
    lines.push(
      `(baseline: the same declarations one at a time on one channel, up to ${fmt(BASELINE_MAX_TENANTS)} tenants; queues alone: the same queues and nothing else, ${PROVISION_LANES} channels, the broker's floor for provision; serving all: from the process's start, and from start(); ` +
        `idle CPU over ${opts.idleSeconds} s after a 2 s settle; latency: ${t.latencyJobs} jobs, each for a random tenant, publish to the output's delivery)`,
    );
  }
  if (results.pooled) {
    const p = results.pooled;
    const rows = [
      ['pooled memory', 'tenants', 'channels', 'consuming after s', 'RSS MiB', 'peak RSS MiB', 'heap MiB', 'idle CPU % of a core'],
      ...[p.one, p.many].map((s) => [
        'relay_ab, idle',
        fmt(s.tenants),
        String(s.channels),
        s.startSeconds.toFixed(1),
        s.rssMiB.toFixed(1),
        s.peakRssMiB.toFixed(1),
        s.heapUsedMiB.toFixed(1),
        s.idleCpuPercent.toFixed(1),
      ]),
      [
        'ratio',
        `${fmt(p.many.tenants)}/${fmt(p.one.tenants)}`,
        '',
        '',
        p.rssRatio.toFixed(2),
        (p.many.peakRssMiB / p.one.peakRssMiB).toFixed(2),
        (p.many.heapUsedMiB / p.one.heapUsedMiB).toFixed(2),
        '',
      ],
    ];
    lines.push('');
    lines.push(...grid(rows, [false, true, true, true, true, true, true, true]));
    lines.push(
      `(RSS after start, a 2 s settle and a GC: ${p.kibPerTenant.toFixed(0)} KiB per extra idle tenant; the pooled relay row above: ` +
        `${p.busyTenants} tenants, tenant_prefetch ${p.tenantPrefetch}, in the stagecoach column, 1 tenant in the baseline column)`,
    );
  }
  if (results.fairness) {
    const f = results.fairness.flood;
    const rows = [
      ['fairness', 'tenants', 'concurrency', 'window s', 'jobs in window', 'jobs/s', 'result'],
      [
        'flood vs quiet',
        `1 x ${fmt(f.floodJobs)} + ${f.quietTenants} x ${f.quietJobs}`,
        String(f.concurrency),
        f.windowSeconds.toFixed(2),
        `flood ${f.floodInWindow}, quiet ${f.quietMeanInWindow.toFixed(0)} (${f.quietMinInWindow}-${f.quietMaxInWindow})`,
        fmt(f.jobsPerSecondAll),
        `Jain ${f.jain.toFixed(3)}; quiet done at ${(100 * f.floodShareAtQuietDone).toFixed(1)}% of the flood`,
      ],
      ...[results.fairness.weights, results.fairness.weightsDeep, results.fairness.weightsEmit].map((w) => [
        `weights 3:1, ${w.handlerMs} ms, tenant_prefetch ${w.tenantPrefetch}`,
        `2 x ${fmt(w.jobsEach)}`,
        String(w.concurrency),
        w.windowSeconds.toFixed(2),
        `heavy ${fmt(w.heavyInWindow)}, light ${fmt(w.lightInWindow)}`,
        fmt((w.heavyInWindow + w.lightInWindow) / Math.max(w.windowSeconds, 1e-3)),
        `ratio ${w.ratio.toFixed(2)}:1`,
      ]),
    ];
    lines.push('');
    lines.push(...grid(rows, [false, true, true, true, false, true, false]));
    lines.push(
      `(one pooled process, ${results.fairness.handlerMs} ms handler for the flood, started once every tenant consumed (${f.startSeconds.toFixed(1)} s for ${f.quietTenants + 1}); ` +
        `window = while every tenant had work; the flood alone afterwards ${fmt(f.jobsPerSecondFloodAlone)} jobs/s)`,
    );
  }
  if (results.payloads) {
    const p = results.payloads;
    const mib = (bytes: number | undefined): string => (bytes === undefined ? '-' : (bytes / (1024 * 1024)).toFixed(1));
    const delta = (to: number | undefined, from: number | undefined): string =>
      to === undefined || from === undefined ? '-' : `${to >= from ? '+' : ''}${mib(to - from)}`;
    const { empty, offloaded, inline, after } = p.node;
    const rows = [
      ['broker memory', 'backlog', 'bodies MiB', 'in RAM MiB', 'node mem_used MiB', 'Erlang VM MiB', 'binary MiB'],
      [
        'offloaded',
        `${fmt(p.jobs)} jobs`,
        mib(p.queues.offloadedMedian.messageBytes),
        mib(p.queues.offloadedMedian.messageBytesRam),
        delta(offloaded.memUsed, empty.memUsed),
        delta(offloaded.erlang, empty.erlang),
        delta(offloaded.binary, empty.binary),
      ],
      [
        'inline',
        `${fmt(p.jobs)} jobs`,
        mib(p.queues.inlineMedian.messageBytes),
        mib(p.queues.inlineMedian.messageBytesRam),
        delta(inline.memUsed, offloaded.memUsed),
        delta(inline.erlang, offloaded.erlang),
        delta(inline.binary, offloaded.binary),
      ],
      ['(nothing waiting, start)', '', '', '', mib(empty.memUsed), mib(empty.erlang), mib(empty.binary)],
      ['(nothing waiting, end)', '', '', '', mib(after.memUsed), mib(after.erlang), mib(after.binary)],
    ];
    lines.push('');
    lines.push(...grid(rows, [false, true, true, true, true, true, true]));
    lines.push(
      `(bodies and in RAM: the backlog's queue after each round, median; node columns: what the backlog added, read before the rounds, offloaded first; ` +
        `${fmt(p.messageBytes)} B messages inline; store ${p.store}: ${p.storeAfterRounds.join(', ')} payloads after the offloaded rounds, ${p.storeAfterDrain} after the drain)`,
    );
  }
  if (results.peers) lines.push(...renderPeers(results.peers));
  if (results.schedules) {
    const r = results.schedules;
    const rows = [
      ['schedule over tenants', 'tenants', 'enqueued in s', 'leader CPU ms', 'CPU ms/tenant', 'late p50 / p99 / max ms'],
      ['baseline: Publisher, 64 at once', fmt(r.tenants), r.baselineSeconds.toFixed(1), '', '', ''],
      [
        'one occurrence, no spread',
        fmt(r.tenants),
        r.fireSeconds.toFixed(1),
        fmt(Math.round(r.fireCpuMs)),
        (r.fireCpuMs / r.tenants).toFixed(2),
        '',
      ],
      [
        `one occurrence, spread ${r.spreadSeconds} s`,
        fmt(r.tenants),
        r.spreadFireSeconds.toFixed(1),
        fmt(Math.round(r.spreadCpuMs)),
        (r.spreadCpuMs / r.tenants).toFixed(2),
        `${fmt(Math.round(r.latenessP50Ms))} / ${fmt(Math.round(r.latenessP99Ms))} / ${fmt(Math.round(r.latenessMaxMs))}`,
      ],
      ['plan every tenant', fmt(r.tenants), '', fmt(Math.round(r.planMs)), (r.planMs / r.tenants).toFixed(3), ''],
    ];
    lines.push('');
    lines.push(...grid(rows, [false, true, true, true, true, true]));
    lines.push(`(no spread / baseline: ${(r.fireSeconds / r.baselineSeconds).toFixed(2)}x the time)`);
  }
  const targets = [
    ...(results.tenants ? tenantsTargets(results.tenants) : []),
    ...(results.pooled ? pooledTargets(results.pooled) : []),
    ...(results.fairness ? fairnessTargets(results.fairness) : []),
  ];
  if (targets.length > 0) {
    lines.push('');
    for (const [what, met, value] of targets) lines.push(`${met ? 'target met    ' : 'target MISSED '} ${what}: ${value}`);
  }
  lines.push(
    `(ratio = stagecoach / baseline, quorum / classic for quorum, on / off for tracking, middleware and events, limited / none and achieved / configured for limits, offloaded / inline and configured / none for payloads; memory ratio = large backlog / small backlog; prefix ${config.prefix})`,
  );
  lines.push('');
  return `${lines.join('\n')}\n`;
}

function grid(rows: string[][], right: boolean[]): string[] {
  const widths = (rows[0] as string[]).map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
  const line = (row: string[]): string =>
    row.map((cell, i) => (right[i] ? cell.padStart(widths[i] as number) : cell.padEnd(widths[i] as number))).join('  ');
  return [line(rows[0] as string[]), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)];
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress(`bench: ${signal}, cleaning up (again to quit at once)`);
    void (cleanup?.() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

main()
  .then((code) => process.exit(code))
  .catch((err: unknown) => {
    progress(`bench: ${(err as Error).stack ?? String(err)}`);
    void (cleanup?.() ?? Promise.resolve()).finally(() => process.exit(1));
  });
