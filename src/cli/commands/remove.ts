import { deleteLogicalQueue } from '../../removal/delete-queue.js';
import { STRATEGIES, type RemovalStrategy } from '../../removal/remove-queues.js';
import { retireTenant, type Retirement } from '../../removal/retire-tenant.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { withCommandEvents } from '../../events/command-events.js';
import { createLogger } from '../../logging/logger.js';
import { loadAllStages } from '../../stage/stage-loader.js';
import { checkTenantSlug } from '../../util/tenant-slug.js';
import { EXIT_OK, EXIT_RUNTIME } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

interface RemovalFlags {
  strategy: string;
  target?: string;
  json?: boolean;
  config?: string;
}

/** `stagecoach tenant retire <T> --strategy reject|discard|move [--target Q]` */
export async function tenantRetire(tenant: string, opts: RemovalFlags): Promise<number> {
  const slug = checkTenantSlug(tenant, 'tenant');
  const strategy = checkStrategy(opts.strategy);
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command: 'tenant retire', tenant: slug });
  const result = await withCommandEvents(config, 'tenant retire', log, (onEvent) =>
    retireTenant(config, slug, log, { strategy, onEvent, ...(opts.target === undefined ? {} : { target: opts.target }) }),
  );
  return report(`tenant ${slug}`, result, opts.json === true);
}

/** `stagecoach queue delete <queue> [--tenant T] --strategy reject|discard|move [--target Q]` */
export async function queueDelete(queue: string, opts: RemovalFlags & { tenant?: string }): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const strategy = checkStrategy(opts.strategy);
  const config = await loadConfig(opts.config);
  const stages = (await loadAllStages(config)).map((stage) => stage.metadata);
  const log = createLogger({ service: 'stagecoach', command: 'queue delete', queue, ...(tenant === undefined ? {} : { tenant }) });
  const result = await withCommandEvents(config, 'queue delete', log, (onEvent) =>
    deleteLogicalQueue(config, stages, queue, tenant, log, {
      strategy,
      onEvent,
      ...(opts.target === undefined ? {} : { target: opts.target }),
    }),
  );
  return report(`queue ${queue}${tenant === undefined ? '' : ` of tenant ${tenant}`}`, result, opts.json === true);
}

function checkStrategy(strategy: string): RemovalStrategy {
  if (!(STRATEGIES as readonly string[]).includes(strategy)) {
    throw new StagecoachError('INVALID_REQUEST', `--strategy must be one of ${STRATEGIES.join(', ')}, got "${strategy}"`);
  }
  return strategy as RemovalStrategy;
}

/** Counts per queue on stdout; exit 0 when everything is gone, 1 when something was refused or kept. */
function report(what: string, result: Retirement, json: boolean): number {
  if (json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return result.removed ? EXIT_OK : EXIT_RUNTIME;
  }
  const lines: string[] = [];
  if (result.removed) {
    lines.push(`removed ${what} (strategy ${result.strategy}${result.target === undefined ? '' : `, to ${result.target}`})`);
  } else if (result.strategy === 'reject' && result.exchanges.length === 0 && result.queues.every((q) => !q.deleted)) {
    lines.push(`refused: ${what} still holds jobs (${result.reason ?? ''}); nothing was removed`);
  } else {
    lines.push(`${what} not completely removed: ${result.reason ?? ''}`);
  }
  for (const queue of result.queues) {
    const parts = [`${queue.jobs} job${queue.jobs === 1 ? '' : 's'}`];
    if (queue.discarded > 0) parts.push(`${queue.discarded} discarded`);
    if (queue.moved > 0) parts.push(`${queue.moved} moved`);
    if (queue.kept > 0) parts.push(`${queue.kept} kept (${queue.keptBecause.join('; ')})`);
    if (queue.ids.length > 0) parts.push(`ids ${queue.ids.join(', ')}${queue.ids.length < queue.jobs ? ', ...' : ''}`);
    lines.push(`  ${queue.deleted ? 'deleted ' : 'kept    '} ${queue.name}: ${parts.join(', ')}`);
  }
  for (const exchange of result.exchanges) lines.push(`  deleted  exchange ${exchange}`);
  for (const user of result.users) lines.push(`  deleted  broker user ${user}`);
  for (const policy of result.policies) lines.push(`  deleted  policy ${policy}`);
  for (const name of result.flow) lines.push(`  deleted  flow queue ${name}`);
  if (result.unpaused === true) lines.push('  resumed  the tenant pause (nothing parks its jobs any more)');
  if (!result.removed && result.strategy === 'reject') lines.push('use --strategy discard (drop them) or --strategy move --target <queue>');
  process.stdout.write(`${lines.join('\n')}\n`);
  return result.removed ? EXIT_OK : EXIT_RUNTIME;
}
