/**
 * stagecoach: multi-tenant worker pipelines on RabbitMQ.
 *
 * ```ts
 * import { Stage, inject, LOGGER, type Job, type Logger, type StageContext, type StageHandler } from 'stagecoach';
 *
 * @Stage({ name: 'converter', input: 'conversions', outputs: ['representations'] })
 * export class Converter implements StageHandler {
 *   constructor(@inject(LOGGER) private readonly log: Logger) {}
 *   async handle(job: Job, ctx: StageContext): Promise<void> {
 *     await ctx.emit('representations', { type: 'doc.text', args: [String(job.args[0])] });
 *   }
 * }
 * ```
 * Run it with `stagecoach run converter --tenant acme --config stagecoach.json`.
 */
import 'reflect-metadata';

export { Stage } from './stage/stage.decorator.js';
export type { StageContext, StageHandler, StageMetadata, StageOptions } from './stage/stage.types.js';
export { CONFIG, LOGGER, STAGE_OPTIONS, TENANT, VARIANT } from './stage/tokens.js';
export { HandlerOutcome, RetryJob, DiscardJob, DeadLetterJob } from './retry/handler-outcomes.js';
export { inject, injectable, ContainerModule } from 'inversify';

export type { Job, JobError, JobSpec, PublishSpec, HeaderValue } from './job/job.types.js';
export { createJob, parseEnvelope, JOB_CONTENT_TYPE, SPEC_VERSION } from './job/envelope.js';
export { toWire, fromWire, OJS_HEADERS } from './job/amqp-mapping.js';
export { Publisher } from './publisher/publisher.js';

export type {
  RawConfig,
  CompiledConfig,
  QueueConfig,
  QueueSettings,
  TenantConfig,
  TenantShare,
  StageConfig,
  RetryPolicy,
  VariantsConfig,
  QueueType,
  PayloadsConfig,
  PayloadStoreConfig,
} from './config/config.types.js';
export { settingsFor } from './config/queue-resolver.js';
export { tenantShare, DEFAULT_TENANT_SHARE } from './config/tenant-share.js';
export { loadConfig } from './config/load-config.js';
export { compileConfig, SCHEMA_PATH } from './config/compile-config.js';

export type { PayloadStore, PayloadKey } from './payload/payload-store.js';
export { FsPayloadStore, type FsPayloadStoreOptions } from './payload/fs-payload-store.js';
export { PostgresPayloadStore, type PostgresPayloadStoreOptions } from './payload/postgres-payload-store.js';
export { createPayloadStore } from './payload/create-payload-store.js';
export { checkPayloadKey } from './payload/payload-key.js';

export { BrokerNames } from './topology/names.js';
export type { Topology, ExchangeSpec, QueueSpec, BindingSpec } from './topology/topology.types.js';
export {
  coreTopology,
  provisionTopology,
  queueTopology,
  stageDeclaredTopology,
  stageTopology,
  tenantTopology,
} from './topology/build-topology.js';
export { declareTopology, declareTopologyOnce } from './broker/declare-topology.js';
export type { PolicySpec } from './topology/topology.types.js';
export { queuePolicies } from './topology/queue-policies.js';
export { provisionBroker, type ProvisionResult } from './plan/provision-broker.js';
export { syncQueueSettings } from './plan/queue-settings.js';
export { planChanges, type Plan, type PlanChange } from './plan/plan.js';
export { desiredState } from './plan/desired-state.js';
export { readInventory } from './plan/broker-inventory.js';
export { applyPlan } from './plan/apply-plan.js';

export { StageRunner, type StageRunnerOptions, type RunnerState, type StageRunnerStats } from './runner/stage-runner.js';
export { IsolationGate } from './runner/isolation-gate.js';
export { StageGroup, devInstances, type StageGroupOptions } from './runner/stage-group.js';
export { loadStage, loadAllStages, type LoadedStage } from './stage/stage-loader.js';
export { listUnroutable, replayUnroutable } from './admin/unroutable.js';
export { listDeadLetters, retryDeadLetters, purgeDeadLetters, deadQueuesOf } from './admin/dead-letters-admin.js';
export { retireTenant, type Retirement, type RemovalOptions } from './admin/retire-tenant.js';
export { deleteLogicalQueue } from './admin/delete-queue.js';
export type { RemovalStrategy } from './admin/remove-queues.js';
export type { AdminEvent, AdminEventSink } from './events/admin-events.js';
export { EventPublisher, type EventPublisherOptions } from './events/event-publisher.js';
export { createEvent, EVENT_TYPES, EVENT_SPEC_VERSION, EVENT_CONTENT_TYPE, type EventType, type OjsEvent } from './events/ojs-event.js';
export {
  QueueFullReporter,
  QueueFullThrottle,
  QUEUE_FULL_EVENT_INTERVAL_MS,
  type QueueFullSighting,
} from './events/queue-full-reporter.js';
export { inspectQueues, type InspectOptions } from './inspect/inspect-queues.js';
export { buildQueueReports, type QueueReport, type CompanionDepth } from './inspect/queue-report.js';
export { formatQueues } from './inspect/format-queues.js';
export {
  startAdminServer,
  DEFAULT_ADMIN_HOST,
  DEFAULT_ADMIN_PORT,
  type AdminServer,
  type AdminServerOptions,
} from './admin-api/admin-server.js';
export { ADMIN_TOKEN_ENV } from './admin-api/bearer-auth.js';
export { resolveRetryPolicy, validateRetryPolicy, retryDelayMs } from './retry/retry-policy.js';
export { DELAY_LEVELS, MAX_DELAY_SECONDS, delayTopology } from './topology/delay-topology.js';
export { queueTypeArguments, sharedQueueType } from './topology/queue-type.js';
export { nodeLabel, nodeOf, type BrokerNode } from './broker/broker-nodes.js';
export { TENANT_SLUG, isTenantSlug, checkTenantSlug } from './util/tenant-slug.js';

export {
  StagecoachError,
  ConfigError,
  InvalidPayloadError,
  NonRetryableError,
  PublishError,
  QueueFullError,
  type RefusedJob,
  StageNotFoundError,
  TenantError,
  TenantMismatchError,
  TenantRequiredError,
  UnknownOutputError,
  type ErrorCode,
} from './errors/errors.js';
export { createLogger, type Logger } from './logging/logger.js';
export { BatchFold, batchState, isComplete, jobState, type BatchCounts, type TrackedBatch, type TrackedJob } from './batch/batch-fold.js';
export { Tracker, readTracking, type TrackerOptions } from './batch/tracker.js';
export { batchView, jobView, jobSummary, type JobView, type JobSummary } from './batch/batch-views.js';
export { CALLBACK_NAMES, callbackJobId, callbacksToRun, checkCallbacks, type CallbackMeta } from './batch/batch-callbacks.js';
export type { BatchCallbacks, CallbackName, CallbackSpec } from './job/job.types.js';
export { TrackingReader, ensureTrackingStream } from './batch/tracking-reader.js';
export type { SettledReport, CreatedReport, AnnouncedReport, TrackingRecord, SettlementOutcome } from './batch/tracking-report.js';
export { BATCH_ID, isBatchId, checkBatchId } from './util/batch-id.js';
