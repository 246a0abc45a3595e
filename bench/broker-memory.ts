/**
 * Broker memory per idle tenant, for capacity planning (docs/performance.md "Broker memory per
 * idle tenant"). Under a fresh prefix `brokermem-xxxxxxxx`, declares the topology `provision`
 * declares for a configuration of two tenant-scoped queues, in steps of tenants (default 0, 200,
 * 1000: the core topology alone, then 200 tenants, then 1,000), and after each step reads the
 * broker's memory several times and keeps the median. Everything under the prefix is deleted at
 * the end, after a failure and on Ctrl-C too.
 *
 *   npm run build:all && node dist/bench/broker-memory.js [--tenants 0,200,1000] [--readings 5] [--json]
 *
 * Memory sources, each used when it answers:
 * - the management API, `GET /api/nodes` -> `mem_used` (what the memory alarm compares with the
 *   high watermark), summed over the nodes;
 * - `rabbitmqctl status` (on the broker's machine, with its Erlang cookie), whose memory section
 *   is `rabbitmq-diagnostics memory_breakdown`'s: the node's memory by its calculation strategy (rss by default, what
 *   `mem_used` reports), the Erlang VM's own use (`erlang:memory(total)`), and the categories
 *   (queue processes, mnesia, ETS tables...);
 * - the `memory` of our own queues' processes alone (`rabbitmqctl list_queues name memory`, or the
 *   management API), which other clients of the broker do not disturb.
 *
 * The declarations are those of `provisionTopology` (what `stagecoach provision` declares, less
 * the queue policies, which a configuration without `max_size` or retention does not have), made
 * with plain amqplib on 32 channels: no management API needed.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { parseArgs, promisify } from 'node:util';
import amqplib, { type Channel, type ChannelModel } from 'amqplib';
import { compileConfig, type CompiledConfig } from '../src/index.js';
import { provisionTopology, type Topology } from '../src/wire.js';
import { vhostOfAmqpUrl } from '../src/security/broker-users.js';
import { deletePrefix } from '../src/testing/index.js';
import { inParallel } from '../src/util/in-parallel.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;
const LANES = 32;

const USAGE = `usage: node dist/bench/broker-memory.js [options]
  --tenants <list>      cumulative steps of tenants (default 0,200,1000)
  --readings <n>        memory readings per step, the median is kept (default 5)
  --interval <s>        seconds between readings (default 3)
  --settle <s>          seconds to wait after each step before the first reading (default 20)
  --url <amqp-url>      broker (default env AMQP_URL or amqp://guest:guest@127.0.0.1:5672/)
  --management <url>    management API (default env STAGECOACH_MANAGEMENT_URL or http://guest:guest@127.0.0.1:15672/)
  --json                the result as JSON on stdout`;

interface Options {
  steps: number[];
  readings: number;
  intervalMs: number;
  settleMs: number;
  url: string;
  management: string;
  json: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      tenants: { type: 'string' },
      readings: { type: 'string' },
      interval: { type: 'string' },
      settle: { type: 'string' },
      url: { type: 'string' },
      management: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const int = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw.replace(/_/g, ''));
    if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer >= ${min}, got "${raw}"`);
    return value;
  };
  const steps = (values.tenants ?? '0,200,1000').split(',').map((part) => int('tenants', part.trim(), 0, 0));
  if (steps.some((n, i) => i > 0 && n <= (steps[i - 1] as number))) throw new Error('--tenants: the steps must increase');
  return {
    steps,
    readings: int('readings', values.readings, 5, 1),
    intervalMs: int('interval', values.interval, 3, 0) * 1000,
    settleMs: int('settle', values.settle, 20, 0) * 1000,
    url: values.url ?? process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672/',
    management: values.management ?? process.env.STAGECOACH_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672/',
    json: values.json ?? false,
  };
}

/** One reading of the broker's memory, in bytes; a source that did not answer is absent. */
interface MemoryReading {
  /** Management API: sum of `mem_used` over `GET /api/nodes`. */
  memUsed?: number;
  /** `rabbitmqctl status`: the node's memory by its calculation strategy (rss by default), what `mem_used` reports. */
  total?: number;
  /** `rabbitmqctl status`: what the Erlang VM uses (`erlang:memory(total)`), without what its allocators hold in reserve. */
  erlang?: number;
  /** The breakdown's categories (`queue_procs`, `mnesia`, `other_ets`...), bytes. */
  categories?: Record<string, number>;
  /** Sum of the `memory` of the prefix's queue processes. */
  ownQueues?: number;
}

interface StepResult {
  tenants: number;
  queues: number;
  exchanges: number;
  bindings: number;
  /** Median of each field over the readings. */
  median: MemoryReading;
  readings: number;
}

/** The median of the defined values, or undefined when there are none. */
function median(values: Array<number | undefined>): number | undefined {
  const sorted = values.filter((v): v is number => v !== undefined).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Field by field median of several readings (categories too). */
function medianReading(readings: MemoryReading[]): MemoryReading {
  const field = (key: 'memUsed' | 'total' | 'erlang' | 'ownQueues'): number | undefined => median(readings.map((r) => r[key]));
  const names = new Set(readings.flatMap((r) => Object.keys(r.categories ?? {})));
  const categories = Object.fromEntries(
    [...names].map((name) => [name, median(readings.map((r) => r.categories?.[name])) as number]).filter(([, v]) => v !== undefined),
  );
  const out: MemoryReading = {};
  for (const key of ['memUsed', 'total', 'erlang', 'ownQueues'] as const) {
    const value = field(key);
    if (value !== undefined) out[key] = value;
  }
  if (names.size > 0) out.categories = categories;
  return out;
}

class Management {
  private readonly base: URL;
  private readonly authorization: string;
  constructor(url: string) {
    const parsed = new URL(url);
    this.authorization = `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString('base64')}`;
    parsed.username = '';
    parsed.password = '';
    if (!parsed.pathname.endsWith('/')) parsed.pathname += '/';
    this.base = parsed;
  }
  async get<T>(path: string): Promise<T> {
    const response = await fetch(new URL(`api/${path}`, this.base), {
      headers: { authorization: this.authorization },
      signal: AbortSignal.timeout(30_000),
    });
    if (!response.ok) throw new Error(`GET /api/${path}: ${response.status}`);
    return (await response.json()) as T;
  }
}

/** What can read the broker's memory here: each probe once at start, so a missing source costs nothing later. */
class MemoryProbe {
  private management: Management | undefined;
  private diagnostics = false;
  readonly sources: string[] = [];

  constructor(
    private readonly opts: Options,
    private readonly prefix: string,
  ) {}

  async detect(): Promise<void> {
    const api = new Management(this.opts.management);
    try {
      await api.get('overview');
      this.management = api;
      this.sources.push('management API /api/nodes mem_used');
    } catch {
      // No management plugin or no access: the other sources.
    }
    try {
      await this.breakdown();
      this.diagnostics = true;
      this.sources.push('rabbitmqctl status (memory and its breakdown)');
    } catch {
      // Not on the broker's machine, or no Erlang cookie.
    }
    if (this.sources.length === 0) {
      throw new Error(
        `no memory source answered: neither the management API (${this.opts.management.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@')}) nor rabbitmq-diagnostics`,
      );
    }
  }

  get hasManagement(): boolean {
    return this.management !== undefined;
  }

  async read(): Promise<MemoryReading> {
    const reading: MemoryReading = {};
    if (this.management !== undefined) {
      const nodes = await this.management.get<Array<{ mem_used?: number }>>('nodes?columns=name,mem_used');
      reading.memUsed = nodes.reduce((sum, node) => sum + (node.mem_used ?? 0), 0);
    }
    if (this.diagnostics) Object.assign(reading, await this.breakdown());
    reading.ownQueues = await this.ownQueueMemory();
    return reading;
  }

  /** `rabbitmqctl status`: the node's memory (by strategy and the Erlang VM's) and its breakdown. */
  private async breakdown(): Promise<Pick<MemoryReading, 'total' | 'erlang' | 'categories'>> {
    const { stdout } = await run('rabbitmqctl', ['-q', 'status', '--formatter', 'json'], { timeout: 60_000, maxBuffer: 16 * MiB });
    const status = JSON.parse(stdout) as { memory: Record<string, unknown>; vm_memory_calculation_strategy: string };
    const { total, ...rest } = status.memory as { total: Record<string, number> };
    const measured = total[status.vm_memory_calculation_strategy];
    if (typeof measured !== 'number' || typeof total.erlang !== 'number')
      throw new Error(`rabbitmqctl status: no memory total in ${stdout.slice(0, 200)}`);
    return {
      // What the memory alarm compares with the watermark (rss by default): the management API's mem_used.
      total: measured,
      erlang: total.erlang,
      categories: Object.fromEntries(Object.entries(rest).filter((e): e is [string, number] => typeof e[1] === 'number')),
    };
  }

  /**
   * The memory of the prefix's queue processes alone: from `rabbitmqctl list_queues` when it
   * answers (read from the processes now), else from the management API (sampled every 5 s).
   */
  private async ownQueueMemory(): Promise<number | undefined> {
    const ours = (name: string): boolean => name.startsWith(`${this.prefix}.`);
    let queues: Array<{ name: string; memory?: number }>;
    if (this.diagnostics) {
      const vhost = vhostOfAmqpUrl(this.opts.url);
      const { stdout } = await run('rabbitmqctl', ['-q', 'list_queues', '-p', vhost, 'name', 'memory', '--formatter', 'json'], {
        timeout: 120_000,
        maxBuffer: 256 * MiB,
      });
      queues = JSON.parse(stdout) as typeof queues;
    } else if (this.management !== undefined) {
      queues = await this.management.get(`queues/${encodeURIComponent(vhostOfAmqpUrl(this.opts.url))}?columns=name,memory`);
    } else return undefined;
    return queues.filter((q) => ours(q.name)).reduce((sum, q) => sum + (q.memory ?? 0), 0);
  }
}

/** The compiled configuration of `tenants` tenants of two tenant-scoped queues, no stages. */
function memoryConfig(prefix: string, url: string, management: string, tenants: number): CompiledConfig {
  return compileConfig(
    {
      prefix,
      broker: { url, management },
      tenants: Array.from({ length: tenants }, (_, i) => `t${String(i).padStart(5, '0')}`),
      queues: { scans: { scope: 'tenant' }, conversions: { scope: 'tenant' } },
      stages: {},
    },
    '<inline>',
  );
}

/** The part of `next` that `previous` does not have (the topology of the step's new tenants). */
function added(previous: Topology | undefined, next: Topology): Topology {
  if (previous === undefined) return next;
  const exchanges = new Set(previous.exchanges.map((e) => e.name));
  const queues = new Set(previous.queues.map((q) => q.name));
  const key = (b: Topology['bindings'][number]): string => JSON.stringify([b.source, b.destination, b.routingKey, b.arguments ?? {}]);
  const bindings = new Set(previous.bindings.map(key));
  return {
    exchanges: next.exchanges.filter((e) => !exchanges.has(e.name)),
    queues: next.queues.filter((q) => !queues.has(q.name)),
    bindings: next.bindings.filter((b) => !bindings.has(key(b))),
  };
}

/** Channels of one connection, one per lane, opened on first use. */
class Lanes {
  private readonly channels = new Map<number, Channel>();
  constructor(private readonly connection: ChannelModel) {}
  async get(lane: number): Promise<Channel> {
    let channel = this.channels.get(lane);
    if (channel === undefined) {
      channel = await this.connection.createChannel();
      channel.on('error', () => undefined);
      this.channels.set(lane, channel);
    }
    return channel;
  }
  async close(): Promise<void> {
    for (const channel of this.channels.values()) await channel.close().catch(() => undefined);
    this.channels.clear();
  }
}

/** Exchanges and queues first, then bindings, each on LANES channels. */
async function declare(url: string, topology: Topology): Promise<void> {
  const connection = await amqplib.connect(url, { clientProperties: { connection_name: 'broker-memory declare' } });
  connection.on('error', () => undefined);
  const lanes = new Lanes(connection);
  try {
    await inParallel(topology.exchanges, LANES, async (e, lane) => {
      const options = { durable: e.durable, ...(e.alternateExchange === undefined ? {} : { alternateExchange: e.alternateExchange }) };
      await (await lanes.get(lane)).assertExchange(e.name, e.type, options);
    });
    await inParallel(topology.queues, LANES, async (q, lane) => {
      await (await lanes.get(lane)).assertQueue(q.name, { durable: q.durable, arguments: q.arguments });
    });
    await inParallel(topology.bindings, LANES, async (b, lane) => {
      const channel = await lanes.get(lane);
      if (b.destinationType === 'queue') await channel.bindQueue(b.destination, b.source, b.routingKey, b.arguments ?? {});
      else await channel.bindExchange(b.destination, b.source, b.routingKey, b.arguments ?? {});
    });
  } finally {
    await lanes.close();
    await connection.close().catch(() => undefined);
  }
}

/**
 * Deletes what was declared: the whole prefix through `deletePrefix` when the management API
 * answers, else every queue and exchange of `topology` by name (queues 16 at a time, exchanges
 * one at a time, as deletePrefix does: RabbitMQ 3.10 fails deleting bound exchanges at once).
 */
async function remove(url: string, management: string | undefined, prefix: string, topology: Topology): Promise<void> {
  if (management !== undefined) {
    await deletePrefix(url, management, prefix);
    return;
  }
  const connection = await amqplib.connect(url, { clientProperties: { connection_name: 'broker-memory delete' } });
  connection.on('error', () => undefined);
  const lanes = new Lanes(connection);
  try {
    await inParallel(topology.queues, 16, async (q, lane) => {
      await (await lanes.get(lane)).deleteQueue(q.name);
    });
    const one = await lanes.get(0);
    for (const e of topology.exchanges) await one.deleteExchange(e.name);
  } finally {
    await lanes.close();
    await connection.close().catch(() => undefined);
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const progress = (line: string): void => void process.stderr.write(`${line}\n`);

async function measure(probe: MemoryProbe, opts: Options): Promise<MemoryReading> {
  const readings: MemoryReading[] = [];
  for (let i = 0; i < opts.readings; i++) {
    if (i > 0) await sleep(opts.intervalMs);
    readings.push(await probe.read());
  }
  return medianReading(readings);
}

const mib = (bytes: number | undefined): string => (bytes === undefined ? '-' : (bytes / MiB).toFixed(1));
const kib = (bytes: number | undefined): string => (bytes === undefined ? '-' : (bytes / 1024).toFixed(1));

/** Bytes per tenant and per queue between the first step and each later one, for every source. */
function perTenant(steps: StepResult[]): Array<{ from: number; to: number; perTenant: MemoryReading; perQueue: MemoryReading }> {
  const first = steps[0];
  if (first === undefined) return [];
  return steps.slice(1).map((step) => {
    const tenants = step.tenants - first.tenants;
    const queues = step.queues - first.queues;
    const delta = (key: 'memUsed' | 'total' | 'erlang' | 'ownQueues', per: number): number | undefined => {
      const a = first.median[key];
      const b = step.median[key];
      return a === undefined || b === undefined || per === 0 ? undefined : (b - a) / per;
    };
    const reading = (per: number): MemoryReading => {
      const out: MemoryReading = {};
      for (const key of ['memUsed', 'total', 'erlang', 'ownQueues'] as const) {
        const value = delta(key, per);
        if (value !== undefined) out[key] = value;
      }
      return out;
    };
    return { from: first.tenants, to: step.tenants, perTenant: reading(tenants), perQueue: reading(queues) };
  });
}

let cleanup: (() => Promise<void>) | undefined;

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`broker-memory: ${(err as Error).message}\n(--help for the options)\n`);
    return 2;
  }
  const prefix = `brokermem-${randomBytes(4).toString('hex')}`;
  const probe = new MemoryProbe(opts, prefix);
  await probe.detect();
  progress(`broker-memory: prefix ${prefix}; memory from ${probe.sources.join(', ')}`);

  let declared: Topology | undefined;
  let cleaning: Promise<void> | undefined;
  cleanup = () =>
    (cleaning ??= (async () => {
      if (declared === undefined) return;
      const started = performance.now();
      await remove(opts.url, probe.hasManagement ? opts.management : undefined, prefix, declared);
      progress(
        `broker-memory: deleted ${declared.queues.length} queues, ${declared.exchanges.length} exchanges of ${prefix} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
      declared = undefined;
    })());

  progress(`broker-memory: nothing under ${prefix}: ${opts.readings} readings`);
  const empty = await measure(probe, opts);
  const steps: StepResult[] = [];
  try {
    for (const tenants of opts.steps) {
      const topology = provisionTopology(memoryConfig(prefix, opts.url, opts.management, tenants), []);
      const step = added(declared, topology);
      const started = performance.now();
      declared = topology;
      await declare(opts.url, step);
      progress(
        `broker-memory: ${tenants} tenants: ${topology.queues.length} queues, ${topology.exchanges.length} exchanges, ${topology.bindings.length} bindings (declared ${step.queues.length} queues in ${((performance.now() - started) / 1000).toFixed(1)} s); settling ${opts.settleMs / 1000} s`,
      );
      await sleep(opts.settleMs);
      const median = await measure(probe, opts);
      steps.push({
        tenants,
        queues: topology.queues.length,
        exchanges: topology.exchanges.length,
        bindings: topology.bindings.length,
        median,
        readings: opts.readings,
      });
      progress(
        `broker-memory: ${tenants} tenants: mem_used ${mib(median.memUsed)} MiB, total ${mib(median.total)} MiB, erlang ${mib(median.erlang)} MiB, own queues ${mib(median.ownQueues)} MiB`,
      );
    }
  } finally {
    await cleanup();
  }
  await sleep(opts.settleMs);
  const after = await measure(probe, opts);

  const slopes = perTenant(steps);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ prefix, sources: probe.sources, empty, steps, after, slopes }, null, 2)}\n`);
    return 0;
  }
  const out: string[] = [];
  out.push('| tenants | queues | mem_used MiB | total MiB | erlang MiB | queue_procs MiB | own queues MiB |');
  out.push('| --- | --- | --- | --- | --- | --- | --- |');
  const row = (label: string, queues: string, r: MemoryReading): void =>
    void out.push(
      `| ${label} | ${queues} | ${mib(r.memUsed)} | ${mib(r.total)} | ${mib(r.erlang)} | ${mib(r.categories?.queue_procs)} | ${mib(r.ownQueues)} |`,
    );
  row('nothing declared', '0', empty);
  for (const step of steps) row(String(step.tenants), String(step.queues), step.median);
  row('deleted again', '0', after);
  out.push('');
  out.push('| between | KiB per tenant: mem_used / total / erlang / own queues | KiB per queue: mem_used / total / erlang / own queues |');
  out.push('| --- | --- | --- |');
  for (const s of slopes) {
    const f = (r: MemoryReading): string => `${kib(r.memUsed)} / ${kib(r.total)} / ${kib(r.erlang)} / ${kib(r.ownQueues)}`;
    out.push(`| ${s.from} -> ${s.to} tenants | ${f(s.perTenant)} | ${f(s.perQueue)} |`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
  return 0;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    progress(`broker-memory: ${signal}, deleting what was declared`);
    void (cleanup?.() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    process.stderr.write(`broker-memory: ${(err as Error).stack ?? String(err)}\n`);
    await cleanup?.().catch(() => undefined);
    process.exit(1);
  },
);
