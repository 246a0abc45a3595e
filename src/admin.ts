/**
 * `stagecoach/admin`: for operators and the tools they build. What the `stagecoach` command's
 * administration commands and the admin HTTP API do, as functions: dead letters and unroutable
 * jobs, removing tenants and queues, plan and provision, inspecting queues, queue states, batch
 * directives and batch status, and the admin server itself (docs/administration.md,
 * docs/admin-api.md). Stage authors need none of it: see the root entry, `stagecoach`.
 */
import 'reflect-metadata';

// Dead letters and unroutable jobs.
export { listDeadLetters, retryDeadLetters, purgeDeadLetters, deadQueuesOf } from './dead-letters/dead-letter-actions.js';
export { listUnroutable, replayUnroutable } from './dead-letters/unroutable.js';

// Removing tenants and queues.
export { retireTenant, type Retirement, type RemovalOptions } from './removal/retire-tenant.js';
export { deleteLogicalQueue } from './removal/delete-queue.js';
export type { RemovalStrategy } from './removal/remove-queues.js';

// Plan and provision.
export { provisionBroker, type ProvisionResult } from './plan/provision-broker.js';
export { syncQueueSettings } from './plan/queue-settings.js';
export { planChanges, type Plan, type PlanChange } from './plan/plan.js';
export { desiredState } from './plan/desired-state.js';
export { readInventory } from './plan/broker-inventory.js';
export { applyPlan } from './plan/apply-plan.js';

// Inspecting queues.
export { inspectQueues, type InspectOptions } from './inspect/inspect-queues.js';
export { buildQueueReports, type QueueReport, type CompanionDepth } from './inspect/queue-report.js';
export type { QueueLimits } from './inspect/queue-flow-limits.js';
export { formatQueues } from './inspect/format-queues.js';

// Queue states and batch directives.
export { setQueueState, type PhysicalQueueState } from './queue-state/set-queue-state.js';
export { QUEUE_STATES, type QueueState } from './queue-state/queue-state.js';
export { cancelBatch, pauseBatch, resumeBatch, pauseTenant, resumeTenant, type DirectiveResult } from './directives/batch-directives.js';

// Batch status.
export { readTracking } from './tracker/tracker.js';
export { batchView, jobView, jobSummary, type JobView, type JobSummary } from './batch/batch-views.js';

// Job state (docs/job-state.md).
export { readJobStore } from './tracker/tracker.js';
export { cancelJob } from './directives/cancel-job.js';
export { jobStateView, type JobStateView } from './job-state/job-views.js';
export { JOB_STATES, type JobState, type JobRow, type AttemptError } from './job-state/job-lifecycle.js';
export type { JobStore, JobFilter, JobPage, JobList } from './job-state/job-store.js';
export { MemoryJobStore } from './job-state/memory-job-store.js';
export { PostgresJobStore } from './job-state/postgres-job-store.js';
export { createJobStore } from './job-state/create-job-store.js';

// The events administration publishes.
export type { AdminEvent, AdminEventSink } from './events/admin-events.js';

// The admin HTTP API.
export {
  startAdminServer,
  DEFAULT_ADMIN_HOST,
  DEFAULT_ADMIN_PORT,
  type AdminServer,
  type AdminServerOptions,
} from './http-api/admin-server.js';
export { ADMIN_TOKEN_ENV } from './http-api/bearer-auth.js';

// What `stagecoach dev` provisions around a group's start: `group.start(devProvisioning(...))`
// declares every configured tenant's queues and applies their queue settings, as `dev` does.
export { devProvisioning } from './cli/dev-provisioning.js';
export type { StageProvisioning } from './runner/stage-group.js';
