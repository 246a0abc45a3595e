import type { SettlementInterceptor } from './settle/settlement-interceptor.js';
import type { FlowControl } from '../flow/flow-control.js';
import type { ConfirmPublisher, QueueFullObserver } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import type { PayloadOffloader } from '../payload/payload-offloader.js';
import type { EventSink } from '../events/job-events.js';
import type { Middleware } from '../stage/middleware/middleware.types.js';
import type { LoadedStage } from '../stage/stage-loader.js';
import type { StageHandler } from '../stage/stage.types.js';
import type { QueueState } from '../queue-state/queue-state.js';
import type { ChannelSupervisor } from './channels/channel-supervisor.js';
import type { DirectiveGate } from './handling/directive-gate.js';
import type { FairShare } from './intake/fair-share.js';
import type { IsolationGate } from './intake/isolation-gate.js';
import type { LossLedger } from './loss-ledger.js';
import type { QueueProbe, SharedChannel } from './channels/shared-channel.js';

/*
 * The contract of a StageRunner's construction and attach (re-exported by stage-runner.ts):
 * what a group, a pool or a library user hands it. runner-resources.ts turns it into what the
 * runner owns and what it shares.
 */

export interface StageRunnerOptions {
  config: CompiledConfig;
  stage: LoadedStage;
  /** Required when the stage's input is tenant-scoped; refused when it is shared. */
  tenant?: string;
  /** Consume the tenant's specialised queue for this variant instead of the general one. */
  variant?: string;
  log: Logger;
  /** Where the instance counts its work; nothing is counted when absent. */
  metrics?: InstanceMetrics;
  /**
   * Shared by every runner of a process (StageGroup passes one), so that a suspect runs with
   * nothing else of the process in hand. A runner alone gets its own.
   */
  gate?: IsolationGate;
  /** How often a running instance looks for suspects it was not told about (a function: read at each look). @defaultValue 5000 ms */
  suspectCheckMs?: number | (() => number);
  /**
   * Shared by every runner of a process (StageGroup passes one): what the process lost with a
   * channel while healthy, so that its redelivery is not taken for a crash. A runner alone gets
   * its own.
   */
  ledger?: LossLedger;
  /** Told of every publish a full queue refused (emits, dead letters): `queue.full` events and metrics. */
  onQueueFull?: QueueFullObserver;
  /** One tenant of a pooled process (TenantPool): channels, slots and threads shared with the others. */
  pooled?: PooledResources;
  /**
   * Shared by every runner of a process (StageGroup passes one, attached to its connection):
   * batch and tenant directives. A runner alone gets its own and attaches it itself.
   */
  directives?: DirectiveGate;
  /**
   * Payload offloading (docs/payloads.md), shared by every runner of a process (StageGroup
   * passes one, with one store). Without it, jobs go inline whatever their size, and a job that
   * arrives by reference fails.
   */
  payloads?: PayloadOffloader;
  /**
   * Flow control (docs/flow-control.md), shared by every runner of a process (StageGroup passes
   * one, attached to its connection): the queue's, the stage's and the jobs' own limits. Without
   * it no limit applies.
   */
  flow?: FlowControl;
  /**
   * Process-wide middleware (StageGroupOptions.middleware; docs/middleware.md), outside the
   * stage's own: its execution middleware wraps the stage's, its enqueue middleware runs before
   * the stage's on every emit. @defaultValue none
   */
  middleware?: Middleware;
  /**
   * Where the process publishes OJS events (StageGroup passes its event publisher's): the
   * runner's `job.*` events go there when its input queue has `events` on. Without it, none.
   */
  events?: EventSink;
  /**
   * Concerns around each settlement (settlement-interceptor.ts), the first outermost, around the
   * runner's own (counts, logs, events, tracking reports, payload release). @defaultValue none
   */
  interceptors?: readonly SettlementInterceptor[];
}

/**
 * What the runners of a pooled process share. Each still has its own queues, settlement,
 * lifecycle (pause, drain, quiet per tenant queue) and stage instance; the pool owns these and
 * attaches, heals and closes them.
 */
export interface PooledResources {
  /** The process's confirm channel, for every tenant's emits and settlements. */
  publishers: ChannelSupervisor<ConfirmPublisher>;
  /** The work channel this tenant's consumers go on (one per so many tenants). */
  work: SharedChannel;
  /** The channel suspects are taken from, one at a time, process-wide. */
  suspects: SharedChannel;
  /** Where queues are looked at (passive declares), so that a missing one closes no shared channel. */
  probe: QueueProbe;
  /** The stage's `concurrency` slots, shared by weight. */
  share: FairShare;
  weight: number;
  maxConcurrency: number | undefined;
  /** Slots guaranteed to this tenant when it has work (tenant `min_concurrency`). @defaultValue 0 */
  minConcurrency?: number;
  /** Deliveries the broker may send ahead, per consumer of this tenant. */
  prefetch: number;
  /** A handler serving every tenant (worker threads shared by the pool); else one stage instance per tenant, built at its first job. */
  handler?: StageHandler;
  /**
   * false: when healing, only check that the input queue still exists, never declare it again
   * (`--all-tenants`: a queue gone with its retired tenant must not come back). @defaultValue true
   */
  redeclare?: boolean;
  /**
   * true: its suspect part was not declared at attach, and is declared before the first job moved
   * there on each connection (SuspectDeclaration); its suspect watch expects the queue may be
   * missing (`--all-tenants`, a tenant found provisioned). @defaultValue false
   */
  suspectOnFirstUse?: boolean;
}

/** What a pooled runner is told at attach instead of finding out itself (the pool asked the broker for every tenant at once). */
export interface AttachHints {
  /** Its topology was declared with every other tenant's. */
  declared?: boolean;
  /** Its queue's state, read from one listing. */
  state?: QueueState;
}
