import { retryDeadLetters } from '../dead-letters/dead-letter-actions.js';
import { orQueueMissing } from '../dashboard/dashboard-errors.js';
import { isQueueName, QUEUE_NAME_RULE } from '../util/queue-name.js';
import { isTenantSlug, notATenantSlug } from '../util/tenant-slug.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { readJsonObject } from './request-body.js';
import { checkScope } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';

/** The filter fields a bulk retry takes: its jobs are a queue's dead letters, all of them. */
const FILTER_FIELDS = ['queue', 'state', 'tenant'];

/**
 * `POST /ojs/v1/admin/jobs/bulk/retry` `{ filter: { queue, state: "discarded", tenant? }, confirm: true }`
 * (ojs-admin-api 8.1): sends every dead letter of the queue (of one tenant, or of every
 * configured tenant of a tenant-scoped queue) back to it, as `stagecoach dead retry` does.
 * `confirm: true` is required (ojs-admin-api 4: a bulk action is never taken by accident), and
 * the filter is checked before anything is read: a retry takes discarded jobs only, and a
 * queue's whole dead-letter queue (no `type` or `since`: refused, not ignored).
 */
export async function bulkRetry(ctx: AdminContext, { req }: ApiRequest): Promise<ApiResponse> {
  const body = await readJsonObject(req);
  if (body.confirm !== true) {
    throw new ApiError(400, 'INVALID_REQUEST', '"confirm" must be true: a bulk retry is taken only when confirmed', {
      fields: ['confirm'],
    });
  }
  const filter = body.filter;
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter))
    throw new ApiError(400, 'INVALID_REQUEST', '"filter" must be an object naming the queue: { "queue": "...", "state": "discarded" }', {
      fields: ['filter'],
    });
  const given = filter as Record<string, unknown>;
  const others = Object.keys(given).filter((field) => !FILTER_FIELDS.includes(field));
  if (others.length > 0) {
    throw new ApiError(
      400,
      'INVALID_REQUEST',
      `"filter": ${others.join(', ')} not supported: a bulk retry takes a queue's dead letters, all of them (filter by ${FILTER_FIELDS.join(', ')})`,
      { fields: others.map((field) => `filter.${field}`) },
    );
  }
  if (!isQueueName(given.queue))
    throw new ApiError(400, 'INVALID_REQUEST', `"filter.queue" must be a queue name (${QUEUE_NAME_RULE})`, { fields: ['filter.queue'] });
  if (given.state !== undefined && given.state !== 'discarded')
    throw new ApiError(400, 'INVALID_REQUEST', '"filter.state": only discarded jobs (dead letters) are retried', {
      fields: ['filter.state'],
    });
  if (given.tenant !== undefined && !isTenantSlug(given.tenant))
    throw new ApiError(400, 'INVALID_REQUEST', `"filter.tenant": ${notATenantSlug(given.tenant)}`, { fields: ['filter.tenant'] });
  const queue = given.queue;
  const tenant = given.tenant;
  return ctx.serializer.run(async () => {
    const config = await ctx.configFile.load();
    checkScope(config, queue, tenant);
    const result = await orQueueMissing(() => retryDeadLetters(config, queue, tenant, ctx.log));
    ctx.log.info('dead letters retried through the admin API (bulk retry)', { queue, tenant, ...result });
    return {
      status: 200,
      body: {
        action: 'retry',
        matched: result.retried + result.kept,
        succeeded: result.retried,
        failed: result.kept,
        errors: result.kept === 0 ? [] : [{ error: `${result.kept} dead letters are not jobs: left in the dead-letter queue` }],
      },
    };
  });
}
