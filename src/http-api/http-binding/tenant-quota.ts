import type { CompiledConfig } from '../../config/config.types.js';
import { settingsFor } from '../../config/queue-resolver.js';
import { QueueFullError } from '../../errors/errors.js';
import { ApiError, QUEUE_FULL_RETRY_AFTER_S } from '../api-error.js';

/** A bound of a tenant's own queue set in the tenant's own settings: its quota there. */
export interface TenantQuota {
  /** The setting that bounds it: `max_size` (jobs) or `max_size_bytes`. */
  limit: 'max_size' | 'max_size_bytes';
  maximum: number;
  /** Where it is set: `tenants[].queues.<queue>` or the tenant's `_default`. */
  source: string;
}

/**
 * The quota of `tenant` on `queue`: a bound of its own physical queue that its own settings set
 * (`tenants[].queues.<queue>`, or its `_default` when the queue's own settings set no such bound:
 * the layers of settingsFor). A bound the queue's settings give every tenant alike is the
 * queue's, not a quota. Undefined for a shared queue (its physical queue holds every tenant's
 * jobs) and for a tenant without bounds of its own.
 */
export function tenantQuotaOf(config: CompiledConfig, queue: string, tenant: string | undefined): TenantQuota | undefined {
  if (tenant === undefined || config.queues.get(queue)?.scope === 'shared') return undefined;
  if (!config.queues.has(queue) && config.defaultQueue.scope === 'shared') return undefined;
  const layers = config.queueSettings.tenants.get(tenant);
  if (layers === undefined) return undefined;
  const own = config.queueSettings.queues.get(queue) ?? {};
  const resolved = settingsFor(config, queue, tenant);
  for (const limit of ['max_size', 'max_size_bytes'] as const) {
    const maximum = resolved[limit];
    if (maximum === undefined) continue;
    if (layers.get(queue)?.[limit] === maximum) return { limit, maximum, source: `tenants[${tenant}].queues.${queue}.${limit}` };
    if (own[limit] === undefined && layers.get('_default')?.[limit] === maximum)
      return { limit, maximum, source: `tenants[${tenant}].queues._default.${limit}` };
  }
  return undefined;
}

/**
 * A push refused because its tenant's own queue is full, as ojs-multi-tenancy 8.2 answers a tenant
 * over its limit: 429 `TENANT_LIMIT_EXCEEDED` naming the tenant, the limit and its maximum, with
 * `Retry-After` (the queue takes jobs again as they are consumed). Any other refusal is returned
 * as it was.
 */
export function asTenantLimit(err: unknown, config: CompiledConfig): unknown {
  if (!(err instanceof QueueFullError) || err.queue === undefined) return err;
  const quota = tenantQuotaOf(config, err.queue, err.tenant);
  if (quota === undefined) return err;
  return new ApiError(
    429,
    'TENANT_LIMIT_EXCEEDED',
    `tenant "${err.tenant}" has reached its ${quota.limit} (${quota.maximum}) on queue "${err.queue}" (${quota.source}): try again once its jobs are consumed`,
    { tenant_id: err.tenant, queue: err.queue, limit: quota.limit, maximum: quota.maximum },
    { 'Retry-After': String(QUEUE_FULL_RETRY_AFTER_S) },
  );
}
