import type { ConfirmPublisher } from '../../broker/confirm-publisher.js';
import type { CompiledConfig, ResolvedQueueConfig } from '../../config/config.types.js';
import type { JobEvents } from '../../events/job-events.js';
import type { Logger } from '../../logging/logger.js';
import type { InstanceMetrics } from '../../observability/stage-metrics.js';
import type { PayloadOffloader } from '../../payload/payload-offloader.js';
import type { ChannelSupervisor } from '../channels/channel-supervisor.js';
import type { DeadLetterOrigin } from './dead-letters.js';
import type { StageRunnerStats } from './runner-stats.js';
import type { SettlementInterceptor } from './settlement-interceptor.js';

export interface SettlementOptions {
  config: CompiledConfig;
  /** The stage's input queue, resolved. */
  input: ResolvedQueueConfig;
  stage: string;
  /** The instance's own queues: retries and hand-backs return there, crashes go to `suspect`. */
  queues: { due: string; suspect: string; dead: string };
  /** Recorded on every dead letter: dead-letter actions route by it, not by the job's claim. */
  origin: DeadLetterOrigin;
  publishers: ChannelSupervisor<ConfirmPublisher>;
  log: Logger;
  stats: StageRunnerStats;
  metrics: InstanceMetrics;
  /** A job was moved to the suspect queue: the dispatcher should run suspects soon. */
  onSuspected(): void;
  /** Declares the suspect queue before a job is moved there, when it is declared on first use (SuspectDeclaration). */
  ensureSuspect?: (() => Promise<void>) | undefined;
  /**
   * Waits before trying again a copy the broker refused into a queue that cannot be full (a
   * retry or hand-back to `due`, a suspect copy, a dead letter, a parked job: settlement-route-builders.ts).
   * A refusal there means the queue is unavailable for a moment (a quorum queue electing a new
   * leader after its node went down): the copy is published again after each wait, and only when
   * every wait is spent is the delivery rejected to its dead-letter route.
   * @defaultValue REFUSAL_WAITS_MS (about 12 s in all)
   */
  refusalWaitsMs?: readonly number[];
  /** Deletes the payload of a job sent by reference once it completed, was discarded or cancelled. */
  payloads?: PayloadOffloader;
  /** The input queue's `job.*` events, published by the after-settle hook; absent when its `events` is off. */
  events?: JobEvents | undefined;
  /** Around each settle() (StageRunnerOptions.interceptors), the first outermost. @defaultValue none */
  interceptors?: readonly SettlementInterceptor[] | undefined;
}

/** See SettlementOptions.refusalWaitsMs: longer than a quorum queue's leader election. */
export const REFUSAL_WAITS_MS: readonly number[] = [250, 500, 1000, 2000, 2000, 2000, 2000, 2000];
