import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { CompiledConfig } from '../../config/config.types.js';
import { EventPublisher } from '../../events/event-publisher.js';
import type { EventSink } from '../../events/job-events.js';
import { QueueFullReporter } from '../../events/queue-full-reporter.js';
import type { Logger } from '../../logging/logger.js';
import { QueueSizeBounds } from '../../observability/queue-size-bounds.js';
import { StageMetrics } from '../../observability/stage-metrics.js';
import { payloadOffloaderFor, type PayloadOffloader } from '../../payload/payload-offloader.js';
import { FlowControl } from '../../flow/flow-control.js';
import { FlowWatch } from '../../flow/flow-watch.js';
import { publishControl } from '../../control/send-control.js';
import { FlowMetrics } from '../../observability/flow-metrics.js';
import { JobCancels } from '../handling/job-cancels.js';
import { DirectiveGate } from '../handling/directive-gate.js';
import { EventLoopWatch } from '../event-loop-watch.js';
import { IsolationGate } from '../intake/isolation-gate.js';
import { LossLedger } from '../loss-ledger.js';
import { LossAnnouncer } from './loss-announcer.js';
import { stallWindowMs, type StageRunnerOptions } from '../stage-runner.js';
import type { Middleware } from '../../stage/middleware/middleware.types.js';
import type { StageInstance } from './stage-instance.js';

export interface ProcessServicesOptions {
  config: CompiledConfig;
  log: Logger;
  /** `stagecoach <stage names>`: the source of the process's events. */
  names: string;
  /** The process's connection, as it is now (events publish on it). */
  connection(): AmqpConnection | undefined;
  /** Shared with other groups or a health server; a new registry by default. */
  metrics?: StageMetrics;
  /** See StageGroupOptions.payloads. */
  payloads?: PayloadOffloader | false;
  /** See StageGroupOptions.middleware. */
  middleware?: Middleware;
}

/**
 * What there is one of per process, shared by every runner of it. Built here, in one place, and
 * closed here, in one order (`close()`), after every runner stopped:
 * - the isolation gate: a suspect of any runner runs with nothing else of the process in hand;
 * - the event-loop watch and the loss ledger: what the process lost with a channel while
 *   healthy is not a crash when it comes back;
 * - the directive gate: batch and tenant directives (cancel, pause) every runner obeys;
 * - payload offloading and its store (docs/payloads.md), unless the caller shares its own;
 * - the OJS event publisher (`queue.full`, `queue.config_updated`) on the process's connection,
 *   and the queue-full reporter that throttles `queue.full`;
 * - flow control: the tokens of every limit the process's jobs hold (docs/flow-control.md);
 * - the queue bounds read for the capacity metrics, and the metrics registry itself (never
 *   closed: a registry shared with a health server outlives the group).
 */
export class ProcessServices {
  readonly metrics: StageMetrics;
  readonly gate: IsolationGate;
  readonly watch = new EventLoopWatch();
  readonly ledger: LossLedger;
  private readonly announcer: LossAnnouncer;
  readonly directives: DirectiveGate;
  readonly payloads: PayloadOffloader | undefined;
  readonly events: EventPublisher;
  readonly queueFull: QueueFullReporter;
  readonly limits: QueueSizeBounds;
  readonly flow: FlowControl;
  private readonly ownsPayloads: boolean;
  private readonly dropFlowSource: () => void;
  /** Publishes an event as the process, never awaited (flow limits' `rate_limit.*`, the runners' `job.*`). */
  private readonly event: EventSink = (type, subject, data) => void this.events.publish(type, subject, data).catch(() => undefined);

  constructor(private readonly options: ProcessServicesOptions) {
    const { config, log } = options;
    this.gate = new IsolationGate({ log });
    this.metrics = options.metrics ?? new StageMetrics({ log, maxTenantSeries: config.metricsTenants });
    this.ledger = new LossLedger(this.watch, stallWindowMs(config));
    this.announcer = new LossAnnouncer(this.ledger, config, log, options.connection);
    this.directives = new DirectiveGate(config.prefix, log);
    this.payloads = options.payloads === false ? undefined : (options.payloads ?? payloadOffloaderFor(config, log));
    this.ownsPayloads = options.payloads === undefined;
    this.events = new EventPublisher(config, { source: `stagecoach/${options.names}`, log, connection: options.connection });
    this.limits = new QueueSizeBounds(config, log);
    const flowMetrics = FlowMetrics.of(this.metrics.registry);
    const watch = new FlowWatch(flowMetrics, this.event);
    this.flow = new FlowControl(config, log, {
      observe: watch.granted,
      event: this.event,
      broadcast: async (message) => {
        const connection = options.connection();
        if (connection !== undefined) await publishControl(connection, config, message);
      },
    });
    this.dropFlowSource = flowMetrics.addSource(() => this.flow.samples());
    this.queueFull = new QueueFullReporter(config, this.events, {
      onRefused: (refused) => this.metrics.queueOverflow(refused),
    });
  }

  /** What a runner of `instance` takes from the process (a pooled one adds its share of the pool). */
  runnerOptions(instance: StageInstance): StageRunnerOptions {
    const { config, log } = this.options;
    const { stage, tenant, variant } = instance;
    return {
      config,
      stage,
      log: log.child({ stage: stage.metadata.name, tenant, variant }),
      metrics: this.metrics.instance({
        stage: stage.metadata.name,
        queue: stage.metadata.input,
        tenant: tenant ?? '',
        outputs: stage.metadata.outputs,
      }),
      ...(tenant === undefined ? {} : { tenant }),
      ...(variant === undefined ? {} : { variant }),
      gate: this.gate,
      ledger: this.ledger,
      directives: this.directives,
      ...(this.payloads === undefined ? {} : { payloads: this.payloads }),
      onQueueFull: this.queueFull.observe,
      flow: this.flow,
      ...(this.options.middleware === undefined ? {} : { middleware: this.options.middleware }),
      events: this.event,
    };
  }

  /** What of the process lives on its connection (directives, flow control), at every connection. */
  async attach(connection: AmqpConnection): Promise<void> {
    this.directives.attach(connection, new JobCancels(connection, this.options.config, this.options.log));
    await this.flow.attach(connection);
    // What went with the last connection: the other processes may be meeting it now.
    this.announcer.soon();
  }

  /** The connection is gone: flow control's tokens went with it. */
  detach(): void {
    this.flow.detach();
  }

  /**
   * After every runner stopped, before the connection closes: flow control (its token channel:
   * whatever tokens are left go back), the directive gate (its channel), the payload store when the process opened it, the event publisher (its channel on the
   * connection), then the event-loop watch.
   */
  async close(): Promise<void> {
    this.dropFlowSource();
    this.announcer.stop();
    await this.flow.close();
    await this.directives.close();
    if (this.ownsPayloads) await this.payloads?.store.close();
    await this.events.close();
    this.watch.close();
  }
}
