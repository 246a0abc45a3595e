import { countParked } from '../directives/parked-jobs.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { managementClientOf } from '../broker-management/management-client.js';
import { policyTarget } from '../topology/queue-policies.js';
import { BrokerNames } from '../topology/names.js';
import type { StageEndpoints } from '../topology/topology.types.js';
import { deleteFlowQueues, isQueuePartition } from './flow-queues.js';
import { findRemoval, removeQueues } from './remove-queues.js';
import { checkTarget, jobCounts, type RemovalOptions, type Retirement } from './retire-tenant.js';

/**
 * `stagecoach queue delete <queue> [--tenant T]`: removes one logical queue, for one tenant or
 * for every tenant on the broker: its physical queues (main, variants, due, suspect, dead), its
 * variant routers and their bindings, its policies. Its jobs follow the strategy (see
 * remove-queues.ts); with `move`, each tenant's go to the target queue of the same tenant (or a
 * shared target; a shared queue's jobs move to a shared queue only).
 *
 * A queue still configured, or read or written by a configured stage, is refused: `provision`
 * and the stages would declare it again. So is a queue that parked jobs are to come back to
 * (`CONFLICT`): they wait outside it until a resume.
 */
export async function deleteLogicalQueue(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  queue: string,
  tenant: string | undefined,
  log: Logger,
  options: RemovalOptions,
): Promise<Retirement> {
  const user = stages.find((stage) => stage.input === queue || stage.outputs.includes(queue));
  if (config.queues.has(queue) || user !== undefined) {
    const where = config.queues.has(queue) ? `queues.${queue} in ${config.source}` : `stage "${user?.name}" uses it`;
    throw new StagecoachError(
      'INVALID_REQUEST',
      `queue "${queue}" is still configured (${where}): remove it there first, or provision and the stages would declare it again`,
    );
  }
  const api = options.api ?? managementClientOf(config);
  const found = await findRemoval(config, api, {
    queue: (parsed) => parsed.queue === queue && (tenant === undefined || parsed.tenant === tenant),
    exchange: (parsed) =>
      ['variants', 'general', 'state'].includes(parsed.kind) &&
      parsed.queue === queue &&
      (tenant === undefined || parsed.tenant === tenant),
    flow: (partition) => isQueuePartition(config.prefix, partition, queue, tenant),
  });
  if (found.queues.length === 0) {
    const hint = tenant === undefined ? '' : ` of tenant "${tenant}" (a shared queue belongs to no tenant: leave out --tenant)`;
    throw new StagecoachError('NOT_FOUND', `no queue "${queue}"${hint} under prefix "${config.prefix}"`);
  }
  const names = new BrokerNames(config.prefix);
  const targetQueues = checkTarget(options, (target) => {
    if (target === queue) throw new StagecoachError('INVALID_REQUEST', `--target must be another queue than "${queue}"`);
    const shared = queueFor(config, target).scope === 'shared';
    const tenants = [...new Set(found.queues.map((q) => q.tenant))];
    if (!shared && tenants.includes(undefined)) {
      throw new StagecoachError(
        'INVALID_REQUEST',
        `"${queue}" is shared: its jobs move to a shared queue only, and "${target}" is tenant-scoped`,
      );
    }
    return shared
      ? [names.queue(target), names.deadQueue(target)]
      : tenants.flatMap((t) => [names.queue(target, t), names.deadQueue(target, t)]);
  });
  // Jobs parked by a pause wait outside the queue, to come back to its due or suspect queues.
  const doomed = new Set(found.queues.map((q) => q.name));
  const parked = await countParked(config, log, ({ returnQueue }) => returnQueue !== undefined && doomed.has(returnQueue));
  if (parked > 0) {
    throw new StagecoachError(
      'CONFLICT',
      `queue "${queue}"${tenant === undefined ? '' : ` of tenant "${tenant}"`} has ${parked} parked job${parked === 1 ? '' : 's'} ` +
        'to come back to it (held by a tenant or batch pause): stagecoach tenant resume or batch resume first, ' +
        'so that they return to its queues, where the strategy applies',
    );
  }

  const outcome = await removeQueues(
    config,
    { ...found, strategy: options.strategy, ...(options.target === undefined ? {} : { target: options.target, targetQueues }) },
    log,
  );
  const result: Retirement = {
    ...outcome,
    strategy: options.strategy,
    ...(options.target === undefined ? {} : { target: options.target }),
    users: [],
    policies: [],
    flow: [],
  };
  if (!outcome.removed) return result;

  await deleteFlowQueues(config, found.flow, log);
  result.flow = found.flow;
  // Its settings: the logical queue's and its tenants' own, or only the tenant's.
  const vhost = vhostOfAmqpUrl(config.broker.url);
  for (const policy of await api.listPolicies(vhost)) {
    const target = policyTarget(config.prefix, policy.name);
    if (target?.queue === queue && (tenant === undefined || target.tenant === tenant)) {
      await api.deletePolicy(vhost, policy.name);
      result.policies.push(policy.name);
    }
  }
  log.info('queue deleted', { queue, tenant, strategy: options.strategy, queues: outcome.queues.length });
  await options.onEvent?.({
    type: 'queue.deleted',
    data: { queue, ...(tenant === undefined ? {} : { tenant }), strategy: options.strategy, ...jobCounts(outcome) },
  });
  return result;
}
