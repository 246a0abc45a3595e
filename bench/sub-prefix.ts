/**
 * What the pooled and fairness scenarios share: configurations of their own under
 * `<bench prefix>-<suffix>` (many tenants, stage settings of their own), deleted by listing them
 * through the management API (`deletePrefix`: a thousand tenants' queues and exchanges), and a
 * filler that publishes many tenants' backlogs at once.
 */
import type { ConfirmChannel } from 'amqplib';
import { v7 as uuidv7 } from 'uuid';
import { compileConfig, createJob, type CompiledConfig, type RawConfig } from '../src/index.js';
import { BrokerNames, toWire } from '../src/wire.js';
import { deletePrefix } from '../src/testing/index.js';
import { closeQuietly, connect, fmt, JOB_TYPE, progress, rawTraceparent, withTimeout, type BenchContext } from './common.js';

/** Prefixes declared under and not deleted yet: the cleanup deletes them, after a failure too. */
const declared = new Set<string>();

export interface SubConfig {
  raw: RawConfig;
  config: CompiledConfig;
  names: BrokerNames;
}

/** A configuration under `<bench prefix>-<suffix>`, registered for the cleanup. */
export function subConfig(ctx: BenchContext, suffix: string, raw: Pick<RawConfig, 'tenants' | 'queues' | 'stages'>): SubConfig {
  const full: RawConfig = {
    prefix: `${ctx.config.prefix}-${suffix}`,
    broker: { url: ctx.opts.url, management: ctx.config.broker.management },
    httpPort: 0,
    ...raw,
  };
  const config = compileConfig(full, ctx.source);
  declared.add(config.prefix);
  return { raw: full, config, names: new BrokerNames(config.prefix) };
}

/** Deletes everything under a sub-configuration's prefix (queues 16 at a time). */
export async function dropSubConfig(ctx: BenchContext, sub: SubConfig): Promise<void> {
  const started = performance.now();
  const deleted = await deletePrefix(ctx.opts.url, ctx.config.broker.management, sub.config.prefix);
  declared.delete(sub.config.prefix);
  progress(
    `  deleted ${sub.config.prefix}: ${fmt(deleted.queues)} queues, ${fmt(deleted.exchanges)} exchanges in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}

/** The cleanup: every sub-prefix not deleted yet (after a failure or an interrupt). */
export async function cleanupSubConfigs(ctx: Pick<BenchContext, 'opts' | 'config'>): Promise<void> {
  for (const prefix of [...declared]) {
    await deletePrefix(ctx.opts.url, ctx.config.broker.management, prefix);
    declared.delete(prefix);
  }
}

export interface FillOptions {
  /** The job's args (the same for every job). */
  args: unknown[];
  /** Give every job a `meta.parent_id`, as emitted jobs have (so inputs and outputs are the same size). */
  withParent?: boolean;
  persistent?: boolean;
  /** Publishes awaiting their confirm. @defaultValue 2000 */
  window?: number;
  timeoutMs: number;
}

/**
 * Publishes each tenant's backlog into its physical `queue`, through the root exchange, in
 * stagecoach's wire format: one confirm channel, `window` publishes in flight, the tenants taken
 * in turn (one job each per turn) until each has its count.
 */
export async function fillTenants(
  ctx: BenchContext,
  sub: SubConfig,
  queue: string,
  counts: ReadonlyArray<readonly [string, number]>,
  options: FillOptions,
): Promise<void> {
  const { args, withParent = false, persistent = true, window = 2000 } = options;
  const total = counts.reduce((sum, [, n]) => sum + n, 0);
  if (total === 0) return;
  // The publishing order, lazily: round r publishes one job of every tenant that has more than r.
  function* order(): Generator<string> {
    const longest = Math.max(...counts.map(([, n]) => n));
    for (let r = 0; r < longest; r++) for (const [tenant, n] of counts) if (r < n) yield tenant;
  }
  const next = order();
  const connection = await connect(ctx.opts.url, 'bench-filler');
  let channel: ConfirmChannel | undefined;
  const started = performance.now();
  try {
    channel = await connection.createConfirmChannel();
    const ch = channel;
    await withTimeout(
      new Promise<void>((resolve, reject) => {
        let confirmed = 0;
        const sendOne = (): void => {
          const step = next.next();
          if (step.done === true) return;
          const tenant = step.value;
          const job = createJob({ type: JOB_TYPE, args, ...(withParent ? { meta: { parent_id: uuidv7() } } : {}) }, { queue, tenant });
          const wire = toWire(job, { tenantHeader: sub.config.tenantHeader, traceparent: rawTraceparent(undefined) });
          ch.publish(sub.names.root, queue, wire.content, { ...wire.options, persistent }, (err: unknown) => {
            if (err) return reject(new Error(`filling ${queue} of ${tenant}: broker nacked a job`));
            confirmed++;
            if (confirmed === total) resolve();
            else sendOne();
          });
        };
        for (let i = 0; i < Math.min(window, total); i++) sendOne();
      }),
      options.timeoutMs,
      `filling ${queue} of ${counts.length} tenants with ${total} jobs`,
    );
  } finally {
    await closeQuietly(connection, channel);
  }
  const seconds = (performance.now() - started) / 1000;
  progress(
    `  filled ${queue} of ${fmt(counts.length)} tenant(s): ${fmt(total)}${persistent ? '' : ' non-persistent'} jobs in ${seconds.toFixed(1)} s (${fmt(total / seconds)}/s)`,
  );
}
