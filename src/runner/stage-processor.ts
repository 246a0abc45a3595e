import { publishRecord } from '../tracking-stream/tracking-stream.js';
import type { ProgressRecord } from '../tracking-stream/tracking-report.js';
import type { JobSink } from '../broker/job-router.js';
import type { ResolvedQueueConfig } from '../config/config.types.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import { identitiesOf } from '../security/broker-users.js';
import { PublisherCheck } from '../security/publisher-check.js';
import { withExecutionMiddleware } from '../stage/middleware/execution-chain.js';
import type { Job } from '../job/job.types.js';
import type { StageHandler } from '../stage/stage.types.js';
import { BrokerNames } from '../topology/names.js';
import { settingsFor } from '../config/queue-resolver.js';
import { uniqueGateFor } from '../job-state/unique/unique-gate.js';
import { DeliveryProcessor } from './handling/delivery-processor.js';
import { JobEvents } from '../events/job-events.js';
import { batchOf } from '../tracking-stream/tracking-stream.js';
import { healingPublisher } from './channels/healing-publisher.js';
import type { StageRunnerOptions } from './runner-options.js';
import type { RunnerResources } from './runner-resources.js';

/** What a runner's processor is made of besides its options. */
export interface StageProcessorParts {
  input: ResolvedQueueConfig;
  /** Built by the resources (a stage instance, threads, or the pool's). */
  handler: StageHandler;
  /** Where `ctx.emit()` publishes. */
  sink: JobSink;
  resources: RunnerResources;
  metrics: InstanceMetrics;
  /** The input queue's `tracking` for the runner's tenant. */
  tracked: boolean;
  /** Reports a tracked job's start (Settlement.started). */
  onStarted: (job: Job) => void;
}

/**
 * The DeliveryProcessor of one runner, configured from its options: the tenant header, the
 * publisher check with broker-enforced tenants (`security.tenantUsers`), the process's loss
 * ledger and directives, the tracking stream (on the healing publisher), payload offloading, and
 * the process's middleware (outside the stage's own: its execution middleware wraps the handler
 * here, on the main thread even when the stage runs in worker threads, whose handler is wrapped
 * in the stage's own there).
 */
export function createStageProcessor(options: StageRunnerOptions, parts: StageProcessorParts): DeliveryProcessor {
  const { config, stage, tenant, log, payloads, middleware } = options;
  const { resources } = parts;
  const names = new BrokerNames(config.prefix);
  const tracking = names.tracking;
  const events = JobEvents.of(config, { queue: stage.metadata.input, tenant, stage: stage.metadata.name }, options.events);
  const record = (progress: ProgressRecord): Promise<void> => publishRecord(healingPublisher(resources.publishers), tracking, progress);
  return new DeliveryProcessor({
    stage: stage.metadata,
    input: parts.input,
    tenant,
    tenantHeader: config.tenantHeader,
    handler: withExecutionMiddleware(parts.handler, middleware?.execution ?? []),
    sink: parts.sink,
    log,
    onPublished: (output) => parts.metrics.published(output),
    forgive: (messageId) => resources.ledger.forgive(messageId),
    timedOut: (messageId) => resources.ledger.timedOutBy(messageId),
    excused: (messageId) => resources.ledger.awaitExcuse(messageId),
    ...(config.security.tenantUsers ? { publisherCheck: new PublisherCheck(identitiesOf(config), tenant) } : {}),
    directives: resources.directives,
    track: (record) => publishRecord(healingPublisher(resources.publishers), tracking, record),
    tracked: parts.tracked,
    onStarted: parts.onStarted,
    ...(payloads === undefined ? {} : { payloads }),
    enqueue: [...(middleware?.enqueue ?? []), ...stage.middleware.enqueue],
    // Progress of a tracked job goes to the job store; of a queue with `events`, to `progress.updated`.
    progress: (job) => ({
      ...(parts.tracked || batchOf(job) !== undefined ? { record } : {}),
      ...(events === undefined ? {} : { event: (sent, report) => events.progress(sent, report.progress, report.message) }),
    }),
    unique: {
      gate: uniqueGateFor(config),
      host: {
        tracked: (job) => settingsFor(config, job.queue, job.tenant).tracking !== false,
        cancel: async (record) => {
          await publishRecord(healingPublisher(resources.publishers), names.jobCancels, record);
          await publishRecord(healingPublisher(resources.publishers), tracking, record);
        },
      },
    },
  });
}
