import amqplib from 'amqplib';
import { compileConfig, createLogger, type CompiledConfig } from '../src/index.js';
import { provisionBroker } from '../src/admin.js';
import { provisionTopology, type Topology } from '../src/wire.js';
import { vhostOfAmqpUrl } from '../src/security/broker-users.js';
import { ManagementApi } from '../src/security/management-api.js';
import { fmt, progress, withTimeout, type BenchContext } from './common.js';
import { deletePrefix } from '../src/testing/index.js';

export interface TenantsResult {
  scenario: 'tenants';
  detail: string;
  tenants: number;
  exchanges: number;
  queues: number;
  bindings: number;
  /** Seconds: the same declarations one at a time on one channel, plain amqplib. */
  baselineSeconds: number;
  /** Seconds: `provisionBroker`, what `stagecoach provision` runs. */
  stagecoachSeconds: number;
  /** baselineSeconds / stagecoachSeconds: how many times faster stagecoach provisions. */
  speedup: number;
}

/** Prefixes this scenario declared under and has not deleted yet (cleaned up on failure too). */
const declared = new Set<string>();

/**
 * Provision time for `--tenants` tenants (default 1,000) of a two-queue configuration, both
 * tenant-scoped, no stages: the baseline declares every exchange, queue and binding of
 * `provisionTopology` (what `provision` declares: the suspect queues are the stages') one at a
 * time on one channel with plain amqplib (what `provision` once did, less its two passive
 * declares per queue entry for drain markers, so the baseline is if anything flattered);
 * stagecoach runs `provisionBroker` (declarations, drain-marker listings, policies, the
 * tenant.provisioned check). Each side gets a fresh prefix of its own, deleted before the
 * other side runs, so both start from the same broker. Afterwards the broker is checked to hold
 * exactly the declared queues and exchanges.
 */
export async function benchTenants(ctx: BenchContext): Promise<TenantsResult> {
  const n = ctx.opts.tenants;
  const tenants = Array.from({ length: n }, (_, i) => `t${String(i).padStart(5, '0')}`);
  const configFor = (side: string): CompiledConfig =>
    compileConfig(
      {
        prefix: `${ctx.config.prefix}-${side}`,
        broker: { url: ctx.opts.url, management: ctx.config.broker.management },
        tenants,
        queues: { scans: { scope: 'tenant' }, conversions: { scope: 'tenant' } },
        stages: {},
      },
      ctx.source,
    );
  const timeoutMs = Math.max(ctx.opts.roundTimeoutMs, n * 300);
  const base = configFor('base');
  const topology = provisionTopology(base, []);
  progress(
    `tenants: ${fmt(n)} tenants, 2 tenant-scoped queues: ${fmt(topology.exchanges.length)} exchanges, ${fmt(topology.queues.length)} queues, ${fmt(topology.bindings.length)} bindings per side`,
  );

  declared.add(base.prefix);
  const baselineSeconds = await timed(() => withTimeout(declareOneByOne(ctx.opts.url, topology), timeoutMs, 'tenants baseline'));
  progress(`tenants: baseline ${baselineSeconds.toFixed(1)} s (provision time for ${fmt(n)} tenants)`);
  await expectDeclared(base, topology);
  await removePrefix(base);

  const sc = configFor('sc');
  declared.add(sc.prefix);
  const log = createLogger({ component: 'bench' }, 'warn');
  let announced = 0;
  const stagecoachSeconds = await timed(() =>
    withTimeout(
      provisionBroker(sc, [], log, {
        onEvent: (event) => {
          if (event.type === 'tenant.provisioned') announced += 1;
          return Promise.resolve();
        },
      }),
      timeoutMs,
      'tenants provision',
    ),
  );
  progress(`tenants: stagecoach ${stagecoachSeconds.toFixed(1)} s (provision time for ${fmt(n)} tenants)`);
  if (announced !== n) throw new Error(`tenants: provision announced ${announced} new tenants, expected ${n}`);
  await expectDeclared(sc, provisionTopology(sc, []));
  await removePrefix(sc);

  return {
    scenario: 'tenants',
    detail: `provision time for ${fmt(n)} tenants x 2 queues`,
    tenants: n,
    exchanges: topology.exchanges.length,
    queues: topology.queues.length,
    bindings: topology.bindings.length,
    baselineSeconds,
    stagecoachSeconds,
    speedup: baselineSeconds / stagecoachSeconds,
  };
}

/** Deletes what the scenario left (after a failure or an interrupt). */
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
  const api = new ManagementApi(config.broker.management);
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
