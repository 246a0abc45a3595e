/**
 * stagecoach: multi-tenant worker pipelines on RabbitMQ.
 *
 * The root entry is for stage authors and library users: the decorator, its tokens and
 * contexts, handler outcomes and errors, job types, `Publisher`, `StageGroup`, configuration
 * and payload stores. Other audiences have entries of their own: `stagecoach/testing` (test
 * helpers), `stagecoach/admin` (operators: administration, plan and provision, inspection, the
 * admin server), `stagecoach/runtime` (the pieces a stage group is made of, and the tracker)
 * and `stagecoach/wire` (what goes over AMQP: envelopes, names, topology).
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

// Writing a stage.
export { Stage, type StageOptions } from './stage/stage.decorator.js';
export type { StageContext, StageHandler, StageMetadata } from './stage/stage.types.js';
export type {
  Middleware,
  EnqueueMiddleware,
  EnqueueNext,
  ExecutionMiddleware,
  ExecutionNext,
  OutgoingJob,
} from './stage/middleware/middleware.types.js';
export { CONFIG, LOGGER, STAGE_OPTIONS, TENANT, VARIANT } from './stage/tokens.js';
export { HandlerOutcome, RetryJob, DiscardJob, DeadLetterJob } from './retry/handler-outcomes.js';
export { inject, injectable, ContainerModule } from 'inversify';

// Jobs and publishing them.
export type {
  Job,
  JobError,
  JobSpec,
  PublishSpec,
  HeaderValue,
  RateLimitPolicy,
  UniquePolicy,
  UniqueDimension,
  UniqueConflict,
  UniqueState,
  BatchCallbacks,
  CallbackName,
  CallbackSpec,
} from './job/job.types.js';
export { createJob } from './job/envelope.js';
export { Publisher } from './publisher/publisher.js';

// Workflows: chains, groups and batches of jobs (docs/workflows.md), from a producer or `ctx.emit`.
export { chain, group, batch } from './workflow/workflow-spec.js';
export type { WorkflowSpec, WorkflowStep, WorkflowJobSpec, WorkflowKind } from './job/workflow.types.js';
export type { WorkflowStartOptions } from './workflow/workflow-start.js';
export { TENANT_SLUG, isTenantSlug, checkTenantSlug } from './util/tenant-slug.js';
export { BATCH_ID, isBatchId, checkBatchId } from './util/batch-id.js';

// Running stages.
export { StageGroup, devInstances, type StageGroupOptions } from './runner/stage-group.js';
export { DevProcess, type DevProcessOptions } from './runner/dev-process.js';
export { loadStage, loadAllStages, type LoadedStage } from './stage/stage-loader.js';

// Configuration.
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
export { loadConfig } from './config/load-config.js';
export { compileConfig, SCHEMA_PATH } from './config/compile-config.js';
export { settingsFor } from './config/queue-resolver.js';
export { tenantShare, DEFAULT_TENANT_SHARE } from './config/tenant-share.js';
export { resolveRetryPolicy, validateRetryPolicy, retryDelayMs } from './retry/retry-policy.js';

// Payload stores.
export type { PayloadStore, PayloadKey } from './payload/payload-store.js';
export { FsPayloadStore, type FsPayloadStoreOptions } from './payload/fs-payload-store.js';
export { PostgresPayloadStore, type PostgresPayloadStoreOptions } from './payload/postgres-payload-store.js';
export { createPayloadStore } from './payload/create-payload-store.js';
export { checkPayloadKey } from './payload/payload-key.js';

// Webhooks: what a receiver checks (docs/webhooks.md).
export { webhookSignature, verifyWebhookSignature } from './webhooks/webhook-signature.js';

// Errors and logging.
export {
  StagecoachError,
  ConfigError,
  DeliveryLostError,
  DuplicateJobError,
  EnqueueRefusedError,
  InvalidPayloadError,
  NonRetryableError,
  PublishError,
  QueueFullError,
  QueueUnavailableError,
  RateLimitedError,
  type RefusedJob,
  StageNotFoundError,
  TenantError,
  TenantMismatchError,
  TenantRequiredError,
  UnknownOutputError,
  UnroutableJobError,
  type UnroutableReason,
  type ErrorCode,
} from './errors/errors.js';
export { createLogger, type Logger } from './logging/logger.js';
