import { Scheduler } from '../../schedule/scheduler.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger, type Logger } from '../../logging/logger.js';
import { startHealthServer } from '../../observability/health-server.js';
import { StageGroup, type StageInstance, type StageProvisioning } from '../../runner/stage-group.js';
import { DevProcess } from '../../runner/dev-process.js';
import { loadAllStages, loadStage } from '../../stage/stage-loader.js';
import { EXIT_OK, EXIT_RUNTIME } from '../exit-codes.js';
import { untilSignal } from '../signals.js';
import { resolveTenant } from '../resolve-tenant.js';
import { queueFor } from '../../config/queue-resolver.js';
import { checkTenantSlug } from '../../util/tenant-slug.js';
import { pooledThreads } from '../../runner/process/pooled-threads.js';
import { devProvisioning } from '../dev-provisioning.js';
import { applyDeclaredQueueSettings } from '../../plan/declared-queue-settings.js';
import type { CompiledConfig } from '../../config/config.types.js';
import type { StageMetadata } from '../../stage/stage.types.js';

/** `stagecoach run <stage> [--tenant T] [--variant V]` */
export async function runStage(
  name: string,
  opts: { tenant?: string; variant?: string; config?: string; httpPort?: string },
): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const stage = await loadStage(config, name);
  const instance: StageInstance = {
    stage,
    ...(tenant === undefined ? {} : { tenant }),
    ...(opts.variant === undefined ? {} : { variant: opts.variant }),
  };
  const log = createLogger({ service: 'stagecoach', stage: name, ...(tenant === undefined ? {} : { tenant }) });
  await applyInputSettings(config, stage.metadata, log);
  // A tenant nobody configured or provisioned is a typo, not a new tenant: exit 2 (checked once connected).
  const group = new StageGroup(config, [instance], log, { knownTenantsOnly: true });
  return runGroup(group, false, httpPort(opts.httpPort, config.httpPort), log);
}

/**
 * `stagecoach run <stage> --tenants a,b,c | --all-tenants [--variant V]`: one process, one
 * connection, the stage's queue of every tenant, slots shared by weight (StageGroup `pooled`).
 */
export async function runPooled(
  name: string,
  opts: { tenant?: string; tenants?: string; allTenants?: boolean; variant?: string; config?: string; httpPort?: string },
): Promise<number> {
  if (opts.tenant !== undefined) throw new StagecoachError('INVALID_REQUEST', '--tenant goes without --tenants and --all-tenants');
  if (opts.tenants !== undefined && opts.allTenants === true) {
    throw new StagecoachError('INVALID_REQUEST', '--tenants and --all-tenants exclude each other');
  }
  const listed = opts.tenants === undefined ? [] : parseTenantList(opts.tenants);
  const config = await loadConfig(opts.config);
  if (config.security.tenantUsers) {
    // Each stage user reads one tenant's queues, and stages trust `user_id` by that user: a
    // process reading every tenant's would need a user the broker no longer keeps apart
    // (docs/pooled-workers.md). Refused rather than half-working.
    throw new StagecoachError(
      'INVALID_REQUEST',
      'security.tenantUsers gives each tenant its own stage user: run one process per tenant (--tenant T), not --tenants or --all-tenants',
    );
  }
  const stage = await loadStage(config, name);
  if (queueFor(config, stage.metadata.input).scope !== 'tenant') {
    throw new StagecoachError('INVALID_REQUEST', `stage "${name}" reads a shared queue: run it without --tenants or --all-tenants`);
  }
  const variant = opts.variant === undefined ? {} : { variant: opts.variant };
  const log = createLogger({ service: 'stagecoach', stage: name, mode: 'pooled' });
  await applyInputSettings(config, stage.metadata, log);
  const threads = await pooledThreads(config, stage, opts.variant, log);
  const group = new StageGroup(
    config,
    listed.map((tenant) => ({ stage, tenant, ...variant })),
    log,
    {
      knownTenantsOnly: true,
      pooled: { stage, ...variant, follow: opts.allTenants === true, ...(threads === undefined ? {} : { threads }) },
    },
  );
  try {
    return await runGroup(group, false, httpPort(opts.httpPort, config.httpPort), log);
  } finally {
    await threads?.close();
  }
}

/** `--tenants a,b,c`: slugs, each once. */
function parseTenantList(list: string): string[] {
  const tenants = list
    .split(',')
    .map((tenant) => tenant.trim())
    .filter((tenant) => tenant !== '');
  if (tenants.length === 0) throw new StagecoachError('INVALID_REQUEST', '--tenants needs at least one tenant, e.g. --tenants acme,globex');
  for (const tenant of tenants) checkTenantSlug(tenant, '--tenants');
  return [...new Set(tenants)];
}

/**
 * `stagecoach dev`: every stage for every tenant, after provisioning them all; a tenant-scoped
 * stage as one pooled group of every tenant (DevProcess).
 */
export async function runDev(opts: { config?: string; httpPort?: string }): Promise<number> {
  const config = await loadConfig(opts.config);
  const stages = await loadAllStages(config);
  const log = createLogger({ service: 'stagecoach', mode: 'dev' });
  const provision = devProvisioning(
    config,
    stages.map((stage) => stage.metadata),
    log,
  );
  // Schedules fire in development too (docs/schedules.md): this process leads unless another scheduler does.
  const schedules = new Scheduler(config, { log });
  schedules.start();
  try {
    return await runGroup(new DevProcess(config, stages, log), provision, httpPort(opts.httpPort, config.httpPort), log);
  } finally {
    await schedules.stop();
  }
}

/**
 * The settings of the queue a stage declares at its start, put before it declares it, so that a
 * queue `provision` never saw is bounded too. Stages of `security.tenantUsers` hold no management
 * user: there `provision` puts them.
 */
async function applyInputSettings(config: CompiledConfig, stage: StageMetadata, log: Logger): Promise<void> {
  if (!config.security.tenantUsers) await applyDeclaredQueueSettings(config, [stage], [stage.input], log);
}

function httpPort(option: string | undefined, configured: number): number {
  if (option === undefined) return configured;
  const port = Number(option);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new StagecoachError('INVALID_REQUEST', `--http-port must be a port number (0 turns it off), got "${option}"`);
  return port;
}

/**
 * Runs until SIGTERM/SIGINT or a `terminate` control message, then drains within the grace
 * period: exit 0 when every job in flight finished, 1 when the grace period ran out or a runner
 * failed. A second signal exits at once (the broker requeues what was unfinished).
 */
async function runGroup(group: StageGroup | DevProcess, provision: StageProvisioning | false, port: number, log: Logger): Promise<number> {
  const signal = untilSignal();
  // Up before the broker connection: readiness then says what the stage is waiting for.
  const http =
    port === 0
      ? undefined
      : await startHealthServer({ port, metrics: group.metrics, readiness: () => ({ ...group.readiness(), node: group.node }), log });
  if (http) log.info('health endpoints listening', { port: http.port });
  try {
    // A signal while it still waits for the broker ends it too.
    const starting = group.start(provision);
    if ((await Promise.race([starting.then(() => 'started' as const), signal.promise])) !== 'started') {
      starting.catch(() => undefined);
      await group.stop();
      return EXIT_OK;
    }
    const outcome = await Promise.race([signal.promise, group.terminated, group.failed]);
    log.info('stopping: finishing the jobs in flight within the grace period', {
      cause: typeof outcome === 'string' ? outcome : outcome instanceof Error ? 'failed' : 'terminate',
      grace_period_s: group.gracePeriod,
    });
    const drained = await group.stop();
    return outcome instanceof Error || !drained ? EXIT_RUNTIME : EXIT_OK;
  } catch (err) {
    await group.stop().catch(() => undefined);
    throw err;
  } finally {
    signal.dispose();
    await http?.close();
  }
}
