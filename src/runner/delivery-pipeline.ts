import { JobRouter } from '../broker/job-router.js';
import { JobEvents } from '../events/job-events.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import type { Delivery } from './channels/delivery.js';
import type { DeliveryProcessor } from './handling/delivery-processor.js';
import { healingPublisher } from './channels/healing-publisher.js';
import type { StageRunnerOptions } from './runner-options.js';
import type { RunnerResources } from './runner-resources.js';
import type { StageRunnerStats } from './settle/runner-stats.js';
import { Settlement } from './settle/settlement.js';
import type { StageInput } from './stage-input.js';
import { createStageProcessor } from './stage-processor.js';

/** What a runner's pipeline is made of besides its options. */
export interface DeliveryPipelineParts {
  at: StageInput;
  resources: RunnerResources;
  stats: StageRunnerStats;
  metrics: InstanceMetrics;
  /** A job was moved to the suspect queue: the runner's suspect watch should run it soon. */
  onSuspected(): void;
}

/**
 * What a delivery of one runner goes through once its intake hands it over: the
 * DeliveryProcessor (admission, the handler, its emits through the runner's JobRouter), then the
 * {@link Settlement} (every ack, reject and republish).
 */
export class DeliveryPipeline {
  readonly settlement: Settlement;
  private readonly sink: JobRouter;
  private processor: DeliveryProcessor | undefined;

  constructor(
    private readonly options: StageRunnerOptions,
    private readonly parts: DeliveryPipelineParts,
  ) {
    const { config, stage, tenant, variant, log } = options;
    const meta = stage.metadata;
    const { input, queues } = parts.at;
    const declaration = parts.resources.suspectDeclaration;
    this.settlement = new Settlement({
      config,
      input,
      stage: meta.name,
      queues: { due: queues.due, suspect: queues.suspect, dead: queues.dead },
      origin: { queue: queues.main, tenant, variant },
      publishers: parts.resources.publishers,
      log,
      stats: parts.stats,
      metrics: parts.metrics,
      onSuspected: () => parts.onSuspected(),
      ...(declaration === undefined ? {} : { ensureSuspect: () => declaration.ensure() }),
      ...(options.payloads === undefined ? {} : { payloads: options.payloads }),
      events: JobEvents.of(config, { queue: meta.input, tenant, stage: meta.name }, options.events),
      interceptors: options.interceptors,
    });
    // A runner of a tenant-scoped input declared its tenant's exchange (stageTopology): its emits go there directly.
    const ownTenant = input.scope === 'tenant' ? tenant : undefined;
    this.sink = new JobRouter(config, healingPublisher(parts.resources.publishers), options.payloads, ownTenant);
  }

  /** Whether prepare() has built the processor. */
  get prepared(): boolean {
    return this.processor !== undefined;
  }

  /** Builds the stage (its container, or its worker threads) and the processor around it. */
  async prepare(): Promise<void> {
    const { at, resources, metrics } = this.parts;
    const handler = await resources.handler();
    const settlement = this.settlement;
    this.processor = createStageProcessor(this.options, {
      input: at.input,
      handler,
      sink: this.sink,
      resources,
      metrics,
      tracked: settlement.tracked,
      onStarted: (job) => settlement.started(job),
    });
  }

  /** Processes and settles one delivery. `handled`: called once the handler is done, before the settlement. */
  async run(delivery: Delivery, handled?: () => void): Promise<void> {
    // Its channel died while it waited: the broker redelivers it; running it would duplicate.
    if (delivery.source.closed) return;
    this.parts.metrics.consumed();
    const outcome = await (this.processor as DeliveryProcessor).run(delivery);
    // Held before its tokens go back with the slot: the next job must not take one first.
    if (outcome.kind === 'rate-limited') this.options.flow?.rateLimited(delivery.permit, outcome.job, outcome.error);
    handled?.();
    await this.settlement.settle(delivery, outcome);
  }
}
