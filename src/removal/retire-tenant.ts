import { resumeTenant } from '../directives/batch-directives.js';
import { countParked, isTenantPaused } from '../directives/parked-jobs.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { tenantUserName, TENANT_ROLES, vhostOfAmqpUrl } from '../security/broker-users.js';
import { ManagementClient, managementClientOf } from '../broker-management/management-client.js';
import { escape, policyTarget } from '../topology/queue-policies.js';
import { BrokerNames, parkKey } from '../topology/names.js';
import type { AdminEventSink } from '../events/admin-events.js';
import { deleteFlowQueues, isTenantPartition } from './flow-queues.js';
import { findRemoval, removeQueues, type RemovalOutcome, type RemovalStrategy } from './remove-queues.js';

export interface RemovalOptions {
  strategy: RemovalStrategy;
  /** The target logical queue of `move`. */
  target?: string;
  api?: ManagementClient;
  /** Where `tenant.retired` / `queue.deleted` go (see events/admin-events.ts); the command line publishes them on `<prefix>.events`. */
  onEvent?: AdminEventSink;
}

export interface Retirement extends RemovalOutcome {
  strategy: RemovalStrategy;
  target?: string;
  /** Broker users deleted (with `security.tenantUsers`). */
  users: string[];
  /** The tenant's own policies deleted. */
  policies: string[];
  /** Its flow-limit queues deleted (its queues' limits, its shares of per-tenant limits: flow-queues.ts). */
  flow: string[];
  /** `tenant retire`: its `tenant pause` was lifted (marker removed, stages told), so that nothing parks its jobs any more. */
  unpaused?: boolean;
}

/**
 * `stagecoach tenant retire <T>`: removes everything of a tenant on the broker: its queues (main,
 * variants, due, suspect, dead), its exchanges (tenant exchange, variant routers) with their
 * bindings, its own policies, and its broker users with `security.tenantUsers`. Its jobs follow
 * the strategy (see remove-queues.ts); with `move`, to a shared queue, where they keep their
 * tenant (its own queues go with it, and another tenant's are never a target).
 *
 * Afterwards `run --tenant T` refuses it (neither configured nor provisioned) and producers'
 * jobs for it land in `unroutable`. A tenant still in the configuration is refused: `provision`
 * and `run` would declare it again.
 *
 * Parked jobs (docs/batches.md) live outside the tenant's queues: a tenant with any is refused
 * (`CONFLICT`) until a resume sends them back to its queues, where the strategy applies. A
 * `tenant pause` without parked jobs is lifted with the retirement, so that shared stages stop
 * parking its jobs (a late one goes back to its removed queue, that is to `unroutable`).
 */
export async function retireTenant(config: CompiledConfig, tenant: string, log: Logger, options: RemovalOptions): Promise<Retirement> {
  if (config.tenants.includes(tenant)) {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `tenant "${tenant}" is configured (tenants in ${config.source}): remove it there first, or provision and run would declare it again`,
    );
  }
  // Jobs parked by a pause wait outside the tenant's queues, under its routing key.
  const parked = await countParked(config, log, ({ key }) => key === parkKey(tenant));
  if (parked > 0) {
    throw new StagecoachError(
      'CONFLICT',
      `tenant "${tenant}" has ${parked} parked job${parked === 1 ? '' : 's'} (held by a tenant or batch pause), ` +
        `outside its queues: stagecoach tenant resume ${tenant} (or batch resume of its paused batches) first, ` +
        'so that they return to its queues, where the strategy applies',
    );
  }
  const names = new BrokerNames(config.prefix);
  const targetQueues = checkTarget(options, (target) => {
    if (queueFor(config, target).scope !== 'shared') {
      throw new StagecoachError(
        'INVALID_REQUEST',
        `--target "${target}" is tenant-scoped: a retired tenant's jobs move to a shared queue only (its own queues go with it, another tenant's are never a target)`,
      );
    }
    return [names.queue(target), names.deadQueue(target)];
  });
  const api = options.api ?? managementClientOf(config);
  const found = await findRemoval(config, api, {
    queue: (parsed) => parsed.tenant === tenant,
    exchange: (parsed) => parsed.tenant === tenant && ['tenant', 'variants', 'general', 'state'].includes(parsed.kind),
    flow: (partition) => isTenantPartition(config.prefix, partition, tenant),
    // Every name of the tenant holds its slug: the broker filters the listings by it.
    named: `^${escape(config.prefix)}\\..*${escape(tenant)}`,
  });
  const users: string[] = [];
  if (config.security.tenantUsers) {
    for (const role of TENANT_ROLES) {
      const user = tenantUserName(config.prefix, role, tenant);
      if (await api.userExists(user)) users.push(user);
    }
  }
  if (found.queues.length + found.exchanges.length + users.length === 0) {
    throw new StagecoachError('NOT_FOUND', `tenant "${tenant}" has nothing on the broker under prefix "${config.prefix}"`);
  }

  const outcome = await removeQueues(
    config,
    { ...found, strategy: options.strategy, ...(options.target === undefined ? {} : { target: options.target, targetQueues }) },
    log,
  );
  const result: Retirement = { ...outcome, strategy: options.strategy, ...withTarget(options), users: [], policies: [], flow: [] };
  if (!outcome.removed) return result;

  await deleteFlowQueues(config, found.flow, log);
  result.flow = found.flow;
  for (const user of users) await api.deleteUser(user);
  result.users = users;
  const vhost = vhostOfAmqpUrl(config.broker.url);
  for (const policy of await api.listPolicies(vhost)) {
    if (policyTarget(config.prefix, policy.name)?.tenant === tenant) {
      await api.deletePolicy(vhost, policy.name);
      result.policies.push(policy.name);
    }
  }
  if (await isTenantPaused(config, tenant, log)) {
    await resumeTenant(config, tenant, log);
    result.unpaused = true;
  }
  log.info('tenant retired', { tenant, strategy: options.strategy, queues: outcome.queues.length, users });
  await options.onEvent?.({
    type: 'tenant.retired',
    data: { tenant, strategy: options.strategy, ...withTarget(options), ...jobCounts(outcome) },
  });
  return result;
}

/** `--target` with `move` and only then; the target's physical queues, as `resolve` names them. */
export function checkTarget(options: RemovalOptions, resolve: (target: string) => string[]): string[] {
  if (options.strategy === 'move') {
    if (options.target === undefined) throw new StagecoachError('INVALID_REQUEST', '--strategy move needs --target <queue>');
    return resolve(options.target);
  }
  if (options.target !== undefined) throw new StagecoachError('INVALID_REQUEST', '--target goes with --strategy move only');
  return [];
}

/** How many jobs the removal found, dropped and moved (an event's `jobs_affected`). */
export function jobCounts(outcome: RemovalOutcome): { jobs_affected: number; discarded: number; moved: number } {
  const sum = (field: 'jobs' | 'discarded' | 'moved'): number => outcome.queues.reduce((total, queue) => total + queue[field], 0);
  return { jobs_affected: sum('jobs'), discarded: sum('discarded'), moved: sum('moved') };
}

function withTarget(options: RemovalOptions): { target?: string } {
  return options.target === undefined ? {} : { target: options.target };
}
