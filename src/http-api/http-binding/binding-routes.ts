import type { ApiRequest, ApiResponse, Route } from '../router.js';
import type { BindingContext } from './binding-context.js';
import { health, manifest } from './discovery-handlers.js';
import { jobActivate, jobCancel, jobInfo, jobStatus } from './job-handlers.js';
import { pushBatch, pushJob } from './push-handlers.js';
import { resetJobs } from './reset-handler.js';
import { deleteDeadLetter, listDeadLetter, retryDeadLetter } from './dead-letter-handlers.js';
import { listEvents } from './event-handlers.js';
import { queueStats } from './queue-stats-handler.js';
import { tenantStats } from './tenant-stats-handler.js';
import { getProgress, putProgress } from './progress-handlers.js';
import { deleteCron, getCron, listCrons, registerCron, toggleCron, triggerCron } from './cron-handlers.js';
import { ackJob, fetchJobs, heartbeat, nackJob } from './worker-handlers.js';
import { listWorkers, orderWorker } from './worker-admin-handlers.js';
import { getRateLimit } from '../rate-limit-handlers.js';
import { pushedPolicy } from './rate-limit-input.js';
import { createWebhook, deleteWebhook, getWebhook, listWebhooks, updateWebhook } from './webhook-handlers.js';
import { cancelWorkflow, createWorkflow, getWorkflow, listWorkflows } from './workflow-handlers.js';

/**
 * The OJS HTTP binding's endpoints (spec/ojs-http-binding.md; docs/http-binding.md), served by
 * `stagecoach admin` beside the queue admin API. `GET /ojs/v1/jobs` (list) stays the admin API's.
 * Who may call each: `access` (bearer-auth.ts callerOf).
 */
export function bindingRoutes(ctx: BindingContext): Route[] {
  const bind =
    (handler: (ctx: BindingContext, request: ApiRequest) => Promise<ApiResponse>) =>
    (request: ApiRequest): Promise<ApiResponse> =>
      handler(ctx, request);
  return [
    { method: 'GET', path: '/ojs/manifest', mutating: false, access: 'open', handle: () => manifest() },
    { method: 'GET', path: '/ojs/v1/health', mutating: false, access: 'open', handle: bind(health) },
    { method: 'POST', path: '/ojs/v1/jobs', mutating: true, access: 'tenant', handle: bind(pushJob) },
    { method: 'POST', path: '/ojs/v1/jobs/batch', mutating: true, access: 'tenant', handle: bind(pushBatch) },
    { method: 'GET', path: '/ojs/v1/jobs/{id}', mutating: false, access: 'tenant', handle: bind(jobInfo) },
    { method: 'DELETE', path: '/ojs/v1/jobs/{id}', mutating: true, access: 'tenant', handle: bind(jobCancel) },
    { method: 'POST', path: '/ojs/v1/jobs/{id}/activate', mutating: true, access: 'tenant', handle: bind(jobActivate) },
    { method: 'PUT', path: '/ojs/v1/jobs/{id}/progress', mutating: true, access: 'tenant', handle: bind(putProgress) },
    { method: 'GET', path: '/ojs/v1/jobs/{id}/progress', mutating: false, access: 'tenant', handle: bind(getProgress) },
    // `job status --json`'s view of a job (the dashboard's), beside the binding's INFO.
    { method: 'GET', path: '/ojs/v1/jobs/{id}/status', mutating: false, access: 'tenant', handle: bind(jobStatus) },
    { method: 'POST', path: '/ojs/v1/workers/fetch', mutating: true, access: 'tenant', handle: bind(fetchJobs) },
    { method: 'POST', path: '/ojs/v1/workers/ack', mutating: true, access: 'tenant', handle: bind(ackJob) },
    { method: 'POST', path: '/ojs/v1/workers/nack', mutating: true, access: 'tenant', handle: bind(nackJob) },
    { method: 'POST', path: '/ojs/v1/workers/heartbeat', mutating: true, access: 'tenant', handle: bind(heartbeat) },
    { method: 'GET', path: '/ojs/v1/dead-letter', mutating: false, access: 'tenant', handle: bind(listDeadLetter) },
    { method: 'POST', path: '/ojs/v1/dead-letter/{id}/retry', mutating: true, access: 'tenant', handle: bind(retryDeadLetter) },
    { method: 'DELETE', path: '/ojs/v1/dead-letter/{id}', mutating: true, access: 'tenant', handle: bind(deleteDeadLetter) },
    { method: 'GET', path: '/ojs/v1/queues/{name}/stats', mutating: false, access: 'tenant', handle: bind(queueStats) },
    { method: 'GET', path: '/ojs/v1/events', mutating: false, access: 'tenant', handle: bind(listEvents) },
    { method: 'POST', path: '/ojs/v1/workflows', mutating: true, access: 'tenant', handle: bind(createWorkflow) },
    { method: 'GET', path: '/ojs/v1/workflows', mutating: false, access: 'tenant', handle: bind(listWorkflows) },
    { method: 'GET', path: '/ojs/v1/workflows/{id}', mutating: false, access: 'tenant', handle: bind(getWorkflow) },
    { method: 'DELETE', path: '/ojs/v1/workflows/{id}', mutating: true, access: 'tenant', handle: bind(cancelWorkflow) },
    { method: 'GET', path: '/ojs/v1/cron', mutating: false, access: 'tenant', handle: bind(listCrons) },
    { method: 'POST', path: '/ojs/v1/cron', mutating: true, access: 'tenant', handle: bind(registerCron) },
    { method: 'GET', path: '/ojs/v1/cron/{name}', mutating: false, access: 'tenant', handle: bind(getCron) },
    { method: 'DELETE', path: '/ojs/v1/cron/{name}', mutating: true, access: 'tenant', handle: bind(deleteCron) },
    { method: 'PATCH', path: '/ojs/v1/cron/{name}', mutating: true, access: 'tenant', handle: bind(toggleCron) },
    { method: 'POST', path: '/ojs/v1/cron/{name}/trigger', mutating: true, access: 'tenant', handle: bind(triggerCron) },
    { method: 'POST', path: '/ojs/v1/webhooks/subscriptions', mutating: true, access: 'tenant', handle: bind(createWebhook) },
    { method: 'GET', path: '/ojs/v1/webhooks/subscriptions', mutating: false, access: 'tenant', handle: bind(listWebhooks) },
    { method: 'GET', path: '/ojs/v1/webhooks/subscriptions/{id}', mutating: false, access: 'tenant', handle: bind(getWebhook) },
    { method: 'PATCH', path: '/ojs/v1/webhooks/subscriptions/{id}', mutating: true, access: 'tenant', handle: bind(updateWebhook) },
    { method: 'DELETE', path: '/ojs/v1/webhooks/subscriptions/{id}', mutating: true, access: 'tenant', handle: bind(deleteWebhook) },
    // A tenant's token reads its own tenant's only (tenant-stats-handler.ts).
    { method: 'GET', path: '/ojs/v1/admin/tenants/{id}/stats', mutating: false, access: 'tenant', handle: bind(tenantStats) },
    // An operator's: the admin token only.
    { method: 'GET', path: '/ojs/v1/admin/workers', mutating: false, handle: bind(listWorkers) },
    // A partition no job took a token of yet is known from the policies of the jobs pushed here.
    {
      method: 'GET',
      path: '/ojs/v1/rate-limits/{key}',
      mutating: false,
      handle: bind((binding, request) => getRateLimit(binding.admin, request, (key) => pushedPolicy(binding.envelopes, key))),
    },
    { method: 'POST', path: '/ojs/v1/admin/workers/{id}/quiet', mutating: true, handle: bind(orderWorker('quiet')) },
    { method: 'POST', path: '/ojs/v1/admin/workers/{id}/terminate', mutating: true, handle: bind(orderWorker('terminate')) },
    ...(ctx.testReset ? [{ method: 'POST' as const, path: '/ojs/v1/admin/reset', mutating: true, handle: bind(resetJobs) }] : []),
  ];
}
