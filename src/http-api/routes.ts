import type { AdminContext } from './admin-context.js';
import { batchDetails, batchDirective, batchJobs, listBatches, tenantDirective } from './batch-handlers.js';
import { listJobs } from './job-list-handler.js';
import { getConfig, putConfig } from './config-handlers.js';
import { getBackpressure, putBackpressure } from './backpressure-handlers.js';
import { createQueue } from './create-handler.js';
import { listRateLimits, putRateLimit } from './rate-limit-handlers.js';
import { getPool, listPools, schedulingStats } from './pool-handlers.js';
import { deleteQueuePool, putQueuePool } from './queue-pool-handlers.js';
import { bulkRetry } from './bulk-handlers.js';
import { deleteQueue } from './delete-handler.js';
import { changeState, listQueues, queueDetails } from './queue-handlers.js';
import type { ApiRequest, ApiResponse, Route } from './router.js';

const BASE = '/ojs/v1/queues';
const BATCHES = '/ojs/v1/batches';

/**
 * Every endpoint of the admin API (OJS queue configuration section 9, plus the states of 5.1,
 * batch and job status, the rate-limiting extension's section 10, and the backpressure extension's
 * queue bounds). `GET` and `DELETE /ojs/v1/jobs/{id}` are the HTTP binding's routes
 * (src/http-api/http-binding/), and so is `GET /ojs/v1/rate-limits/{key}`, which also knows the
 * policies of jobs pushed there. Every route is
 * the operator's (the admin token; a viewer's on reads) unless its `access` says otherwise.
 */
export function adminRoutes(ctx: AdminContext): Route[] {
  const bind =
    (handler: (ctx: AdminContext, request: ApiRequest) => Promise<ApiResponse>) =>
    (request: ApiRequest): Promise<ApiResponse> =>
      handler(ctx, request);
  return [
    { method: 'GET', path: BASE, mutating: false, handle: bind(listQueues) },
    { method: 'POST', path: BASE, mutating: true, handle: bind(createQueue) },
    { method: 'GET', path: `${BASE}/_default/config`, mutating: false, handle: bind(getConfig('_default')) },
    { method: 'PUT', path: `${BASE}/_default/config`, mutating: true, handle: bind(putConfig('_default')) },
    { method: 'GET', path: `${BASE}/{name}`, mutating: false, handle: bind(queueDetails) },
    { method: 'DELETE', path: `${BASE}/{name}`, mutating: true, handle: bind(deleteQueue) },
    { method: 'GET', path: `${BASE}/{name}/config`, mutating: false, handle: bind(getConfig()) },
    { method: 'PUT', path: `${BASE}/{name}/config`, mutating: true, handle: bind(putConfig()) },
    { method: 'POST', path: `${BASE}/{name}/pause`, mutating: true, handle: bind(changeState('pause')) },
    { method: 'POST', path: `${BASE}/{name}/resume`, mutating: true, handle: bind(changeState('resume')) },
    { method: 'POST', path: `${BASE}/{name}/drain`, mutating: true, handle: bind(changeState('drain')) },
    // ojs-backpressure 6.2: the same settings in the extension's words.
    { method: 'GET', path: '/ojs/v1/admin/queues/{name}/config', mutating: false, handle: bind(getBackpressure) },
    { method: 'PUT', path: '/ojs/v1/admin/queues/{name}/config', mutating: true, handle: bind(putBackpressure) },
    { method: 'GET', path: BATCHES, mutating: false, handle: bind(listBatches) },
    { method: 'GET', path: `${BATCHES}/{id}`, mutating: false, handle: bind(batchDetails) },
    { method: 'GET', path: `${BATCHES}/{id}/jobs`, mutating: false, handle: bind(batchJobs) },
    { method: 'POST', path: `${BATCHES}/{id}/cancel`, mutating: true, handle: bind(batchDirective('cancel')) },
    { method: 'POST', path: `${BATCHES}/{id}/pause`, mutating: true, handle: bind(batchDirective('pause')) },
    { method: 'POST', path: `${BATCHES}/{id}/resume`, mutating: true, handle: bind(batchDirective('resume')) },
    { method: 'POST', path: '/ojs/v1/tenants/{tenant}/pause', mutating: true, handle: bind(tenantDirective('pause')) },
    { method: 'POST', path: '/ojs/v1/tenants/{tenant}/resume', mutating: true, handle: bind(tenantDirective('resume')) },
    { method: 'GET', path: '/ojs/v1/jobs', mutating: false, access: 'tenant', handle: bind(listJobs) },
    { method: 'GET', path: '/ojs/v1/rate-limits', mutating: false, handle: bind(listRateLimits) },
    { method: 'PUT', path: '/ojs/v1/rate-limits/{key}', mutating: true, handle: bind(putRateLimit) },
    // ojs-admin-api's paths (6.3, 6.4, 8.1) beside this API's own: the operator's.
    { method: 'POST', path: '/ojs/v1/admin/queues/{name}/pause', mutating: true, handle: bind(changeState('pause')) },
    { method: 'POST', path: '/ojs/v1/admin/queues/{name}/resume', mutating: true, handle: bind(changeState('resume')) },
    { method: 'POST', path: '/ojs/v1/admin/jobs/bulk/retry', mutating: true, handle: bind(bulkRetry) },
    // The pooled share (ojs-fair-scheduling 10): a tenant's token sees its own tenant's place only.
    { method: 'GET', path: '/ojs/v1/admin/pools', mutating: false, access: 'tenant', handle: bind(listPools) },
    { method: 'GET', path: '/ojs/v1/admin/pools/{name}', mutating: false, access: 'tenant', handle: bind(getPool) },
    // Queue pools of HTTP workers: the operator's to define and remove; every worker may fetch through one.
    { method: 'PUT', path: '/ojs/v1/admin/pools/{name}', mutating: true, handle: bind(putQueuePool) },
    { method: 'DELETE', path: '/ojs/v1/admin/pools/{name}', mutating: true, handle: bind(deleteQueuePool) },
    { method: 'GET', path: '/ojs/v1/admin/scheduling/stats', mutating: false, access: 'tenant', handle: bind(schedulingStats) },
  ];
}
