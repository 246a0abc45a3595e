/**
 * Scenario `tenants`: `--tenants` tenants (default 1,000) of the example pipeline's shape
 * (config/pipeline.json: `conversions`, tenant-scoped with a `pdf` variant, and `representations`,
 * tenant-scoped, beside the shared `scan-specs` and `matches`), the converter as the pooled stage.
 *
 * - provision: `provisionBroker` (what `stagecoach provision` runs) for every tenant, timed; with
 *   up to BASELINE_MAX_TENANTS tenants also the baseline: the same declarations one at a time on
 *   one channel with plain amqplib (what `provision` once did), on a prefix of its own deleted
 *   before stagecoach runs. Above that the baseline would load the broker for many minutes and is
 *   left out. Each side is checked to have declared exactly the topology's queues and exchanges.
 * - the queues alone: the same queues (under a prefix of their own, deleted at once) declared on
 *   PROVISION_LANES channels and nothing else, the broker's floor for what provision creates.
 * - plan: what `stagecoach plan` computes (desired state, the broker's inventory, the changes)
 *   right after the provision; nothing should differ.
 * - pooled: a child process runs what `stagecoach run converter --all-tenants` runs, under a
 *   configuration that lists no tenant (it finds every provisioned one on the broker): seconds
 *   from its start until it serves every tenant, its RSS against a one-tenant process of the same
 *   stage (`--tenants t00000`), its CPU while idle over `--idle-seconds` (longer than the 30 s
 *   membership resync, so that it is counted), then a job for each of `--latency-jobs` random
 *   tenants, one at a time, timed from the publish to its output's delivery (p50, p95).
 */
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import amqplib from 'amqplib';
import { compileConfig, createLogger, Publisher, type CompiledConfig, type RawConfig, type StageMetadata } from '../src/index.js';
import { provisionBroker } from '../src/admin.js';
import { declareTopologyOnce, provisionTopology, type Topology } from '../src/wire.js';
import { readInventory } from '../src/plan/broker-inventory.js';
import { desiredState } from '../src/plan/desired-state.js';
import { planChanges } from '../src/plan/plan.js';
import { loadAllStages } from '../src/stage/stage-loader.js';
import { vhostOfAmqpUrl } from '../src/security/broker-users.js';
import { ManagementClient } from '../src/broker-management/management-client.js';
import { fmt, HERE, progress, withTimeout, type BenchContext } from './common.js';
import { measureChild, type PooledRss } from './pooled.js';
import { dropSubConfig, subConfig, type SubConfig } from './sub-prefix.js';
import { deletePrefix } from '../src/testing/index.js';
import { PROVISION_LANES } from '../src/broker/declare-topology.js';

/** The baseline declares one object at a time: above this it would hold the broker for many minutes. */
export const BASELINE_MAX_TENANTS = 2000;
const STAGE = 'converter';

export interface TenantsResult {
  scenario: 'tenants';
  tenants: number;
  exchanges: number;
  queues: number;
  bindings: number;
  /** Seconds: the same declarations one at a time on one channel, plain amqplib; undefined above BASELINE_MAX_TENANTS. */
  baselineSeconds: number | undefined;
  /**
   * Seconds: the topology's queues alone (same names under a prefix of their own, same arguments,
   * no exchange, binding or policy) declared on PROVISION_LANES channels at once: the broker's
   * floor for what `provision` must create, measured in the same run.
   */
  queuesAloneSeconds: number;
  /** Seconds: `provisionBroker`, what `stagecoach provision` runs. */
  provisionSeconds: number;
  /** Seconds: what `stagecoach plan` computes, right after the provision. */
  planSeconds: number;
  /** Changes the plan found right after the provision (0 expected). */
  planChanges: number;
  /** The pooled `--all-tenants` process, and a one-tenant process of the same stage. */
  pooled: PooledRss;
  one: PooledRss;
  /** pooled.rssMiB / one.rssMiB. */
  rssRatio: number;
  /** Per-tenant latency, publish to the output's delivery, ms. */
  latencyJobs: number;
  latencyP50Ms: number;
  latencyP95Ms: number;
}

/** The targets (issue 27); provision is scaled: 6 s per 1,000 tenants (60 s at 10,000). */
export const TENANTS_TARGETS = { provisionSecondsPerTenant: 0.006, planSeconds: 10, servingSeconds: 30, rssRatio: 3, idleCpuPercent: 10 };

/** Prefixes the baseline declared under and has not deleted yet (cleaned up on failure too). */
const declared = new Set<string>();

/** The example pipeline's queues, as config/pipeline.json declares them. */
const PIPELINE_QUEUES = (JSON.parse(readFileSync(path.join(HERE, '../../config/pipeline.json'), 'utf8')) as RawConfig).queues ?? {};

/** The example pipeline's queues and its converter, for `tenants`. */
function pipelineShape(tenants: string[]): Pick<RawConfig, 'tenants' | 'queues' | 'stages'> {
  return {
    tenants,
    queues: PIPELINE_QUEUES,
    stages: { [STAGE]: { module: path.join(HERE, '../stages/converter.stage.js'), concurrency: 4 } },
  };
}

export async function benchTenants(ctx: BenchContext): Promise<TenantsResult> {
  const n = ctx.opts.tenants;
  const tenants = Array.from({ length: n }, (_, i) => `t${String(i).padStart(5, '0')}`);
  const timeoutMs = Math.max(ctx.opts.roundTimeoutMs, n * 300);
  const sub = subConfig(ctx, 'sc', pipelineShape(tenants));
  const stages: StageMetadata[] = (await loadAllStages(sub.config)).map((stage) => stage.metadata);
  const topology = provisionTopology(sub.config, stages);
  progress(
    `tenants: ${fmt(n)} tenants of the example pipeline: ${fmt(topology.exchanges.length)} exchanges, ${fmt(topology.queues.length)} queues, ${fmt(topology.bindings.length)} bindings`,
  );

  let baselineSeconds: number | undefined;
  if (n <= BASELINE_MAX_TENANTS) {
    const base = compileConfig({ ...sub.raw, prefix: `${ctx.config.prefix}-base` }, ctx.source);
    declared.add(base.prefix);
    baselineSeconds = await timed(() =>
      withTimeout(declareOneByOne(ctx.opts.url, provisionTopology(base, stages)), timeoutMs, 'tenants baseline'),
    );
    progress(`tenants: baseline ${baselineSeconds.toFixed(1)} s (one declaration at a time)`);
    await expectDeclared(base, provisionTopology(base, stages));
    await removePrefix(base);
  } else {
    progress(`tenants: no baseline above ${fmt(BASELINE_MAX_TENANTS)} tenants (one declaration at a time would take many minutes)`);
  }

  const log = createLogger({ component: 'bench' }, 'warn');
  // The floor: the same queues under a prefix of their own, declared as `provision` declares
  // (declareTopologyOnce, PROVISION_LANES channels), and nothing else.
  const floor = compileConfig({ ...sub.raw, prefix: `${ctx.config.prefix}-floor` }, ctx.source);
  declared.add(floor.prefix);
  const { queues } = provisionTopology(floor, stages);
  const queuesAloneSeconds = await timed(() =>
    withTimeout(declareTopologyOnce(floor, { exchanges: [], queues, bindings: [] }, log), timeoutMs, 'tenants: the queues alone'),
  );
  progress(`tenants: the ${fmt(topology.queues.length)} queues alone ${queuesAloneSeconds.toFixed(1)} s (${PROVISION_LANES} channels)`);
  await removePrefix(floor);

  try {
    let announced = 0;
    const provisionSeconds = await timed(() =>
      withTimeout(
        provisionBroker(sub.config, stages, log, {
          onEvent: (event) => {
            if (event.type === 'tenant.provisioned') announced += 1;
            return Promise.resolve();
          },
        }),
        timeoutMs,
        'tenants provision',
      ),
    );
    progress(`tenants: provision ${provisionSeconds.toFixed(1)} s`);
    if (announced !== n) throw new Error(`tenants: provision announced ${announced} new tenants, expected ${n}`);
    await expectDeclared(sub.config, topology);

    const api = new ManagementClient(sub.config.broker.management, 120_000);
    let changes = 0;
    const planSeconds = await timed(async () => {
      const plan = planChanges(desiredState(sub.config, stages), await readInventory(sub.config, api));
      changes = plan.changes.length;
    });
    progress(`tenants: plan ${planSeconds.toFixed(1)} s, ${changes} change(s)`);

    // The processes' configuration lists no tenant: as deployed for a SaaS, the tenants are the
    // provisioned ones (the same prefix; the one-tenant process names its tenant).
    const running = subConfig(ctx, 'sc', pipelineShape([]));
    const one = await measureChild(ctx, running, tenants.slice(0, 1), { stage: STAGE });
    let latencies: number[] = [];
    const pooled = await measureChild(ctx, running, [], {
      stage: STAGE,
      follow: true,
      idleMs: ctx.opts.idleSeconds * 1000,
      readyTimeoutMs: Math.max(120_000, n * 100),
      whileRunning: async () => {
        latencies = await latency(running, tenants, ctx.opts.latencyJobs);
      },
    });
    if (pooled.served !== n) throw new Error(`tenants: the --all-tenants process served ${pooled.served} tenants, expected ${n}`);
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
    progress(`tenants: latency over ${sorted.length} tenants p50 ${at(0.5).toFixed(1)} ms, p95 ${at(0.95).toFixed(1)} ms`);
    return {
      scenario: 'tenants',
      tenants: n,
      exchanges: topology.exchanges.length,
      queues: topology.queues.length,
      bindings: topology.bindings.length,
      baselineSeconds,
      queuesAloneSeconds,
      provisionSeconds,
      planSeconds,
      planChanges: changes,
      pooled,
      one,
      rssRatio: pooled.rssMiB / one.rssMiB,
      latencyJobs: sorted.length,
      latencyP50Ms: at(0.5),
      latencyP95Ms: at(0.95),
    };
  } finally {
    // Tens of thousands of queues: minutes at 10,000 tenants. The cleanup at the end tries again.
    await withTimeout(dropSubConfig(ctx, sub), Math.max(120_000, n * 100), `deleting ${sub.config.prefix}`).catch((err: Error) =>
      progress(`  warning: ${err.message} (the cleanup tries again at the end)`),
    );
  }
}

/**
 * A job for each of `count` random tenants, one at a time: from the publish of a text document
 * to its `conversions` until the converter's output is delivered from its `representations`.
 */
async function latency(sub: SubConfig, tenants: readonly string[], count: number): Promise<number[]> {
  const log = createLogger({ component: 'bench' }, 'warn');
  const publisher = await Publisher.connect(sub.config, { log });
  const connection = await amqplib.connect(sub.config.broker.url);
  const times: number[] = [];
  try {
    const channel = await connection.createChannel();
    for (let i = 0; i < count; i++) {
      const tenant = tenants[randomInt(tenants.length)] as string;
      let delivered: () => void = () => undefined;
      const arrived = new Promise<void>((resolve) => (delivered = resolve));
      const { consumerTag } = await channel.consume(sub.names.queue('representations', tenant), () => delivered(), { noAck: true });
      const started = performance.now();
      await withTimeout(
        Promise.all([
          publisher.publish('conversions', {
            type: 'doc.convert',
            args: [{ base64: Buffer.from(`a document of ${tenant}`).toString('base64') }, `${tenant}.txt`],
            tenant,
            headers: { mime: 'text/plain' },
          }),
          arrived,
        ]),
        30_000,
        `tenants: the job of ${tenant} converted`,
      );
      times.push(performance.now() - started);
      await channel.cancel(consumerTag);
    }
  } finally {
    await publisher.close().catch(() => undefined);
    await connection.close().catch(() => undefined);
  }
  return times;
}

/** Deletes what the scenario left (after a failure or an interrupt); its sub-configurations go with cleanupSubConfigs. */
export async function cleanupTenants(ctx: Pick<BenchContext, 'opts' | 'config'>): Promise<void> {
  for (const prefix of [...declared]) {
    await deletePrefix(ctx.opts.url, ctx.config.broker.management, prefix);
    declared.delete(prefix);
  }
}

async function timed(action: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await action();
  return (performance.now() - started) / 1000;
}

/** The baseline: every declaration in order, each awaited, on one channel. */
async function declareOneByOne(url: string, topology: Topology): Promise<void> {
  const connection = await amqplib.connect(url);
  try {
    const channel = await connection.createChannel();
    for (const e of topology.exchanges) {
      await channel.assertExchange(e.name, e.type, {
        durable: e.durable,
        ...(e.alternateExchange === undefined ? {} : { alternateExchange: e.alternateExchange }),
      });
    }
    for (const q of topology.queues) await channel.assertQueue(q.name, { durable: q.durable, arguments: q.arguments });
    for (const b of topology.bindings) {
      const args = b.arguments ?? {};
      if (b.destinationType === 'queue') await channel.bindQueue(b.destination, b.source, b.routingKey, args);
      else await channel.bindExchange(b.destination, b.source, b.routingKey, args);
    }
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Both sides must have declared the same: every queue and exchange of the topology, nothing more. */
async function expectDeclared(config: CompiledConfig, topology: Topology): Promise<void> {
  const api = new ManagementClient(config.broker.management, 120_000);
  const ours = (name: string): boolean => name.startsWith(`${config.prefix}.`);
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const queues = (await api.listQueues(vhost)).filter((q) => ours(q.name)).length;
  const exchanges = (await api.listExchangeNames(vhost)).filter(ours).length;
  if (queues !== topology.queues.length || exchanges !== topology.exchanges.length) {
    throw new Error(
      `tenants: ${config.prefix} has ${queues} queues and ${exchanges} exchanges on the broker, expected ${topology.queues.length} and ${topology.exchanges.length}`,
    );
  }
}

async function removePrefix(config: CompiledConfig): Promise<void> {
  const started = performance.now();
  const removed = await deletePrefix(config.broker.url, config.broker.management, config.prefix);
  declared.delete(config.prefix);
  progress(
    `tenants: deleted ${fmt(removed.queues)} queues, ${fmt(removed.exchanges)} exchanges of ${config.prefix} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}

export function tenantsTargets(result: TenantsResult): Array<[string, boolean, string]> {
  const provisionTarget = result.tenants * TENANTS_TARGETS.provisionSecondsPerTenant;
  return [
    [
      `provision of ${fmt(result.tenants)} tenants < ${provisionTarget.toFixed(0)} s`,
      result.provisionSeconds < provisionTarget,
      `${result.provisionSeconds.toFixed(1)} s`,
    ],
    [`plan < ${TENANTS_TARGETS.planSeconds} s`, result.planSeconds < TENANTS_TARGETS.planSeconds, `${result.planSeconds.toFixed(1)} s`],
    [
      `--all-tenants serving every tenant within ${TENANTS_TARGETS.servingSeconds} s of its start`,
      result.pooled.processSeconds <= TENANTS_TARGETS.servingSeconds,
      `${result.pooled.processSeconds.toFixed(1)} s`,
    ],
    [
      `--all-tenants RSS / 1 tenant <= ${TENANTS_TARGETS.rssRatio}x`,
      result.rssRatio <= TENANTS_TARGETS.rssRatio,
      `${result.rssRatio.toFixed(2)}x`,
    ],
    [
      `--all-tenants idle CPU < ${TENANTS_TARGETS.idleCpuPercent}% of a core`,
      result.pooled.idleCpuPercent < TENANTS_TARGETS.idleCpuPercent,
      `${result.pooled.idleCpuPercent.toFixed(1)}%`,
    ],
  ];
}
