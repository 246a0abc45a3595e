import type { Registry } from 'prom-client';
import type { Logger } from '../logging/logger.js';

// The shapes callers of StageMetrics pass and receive; re-exported by stage-metrics.ts.

export interface StageMetricsOptions {
  /** The registry to register into; a new one if absent. */
  registry?: Registry;
  /** Also collect prom-client's default Node.js metrics into the registry (default true). */
  defaultMetrics?: boolean;
  /** Where a failing queue-depth source is reported. */
  log?: Logger;
  /** How long a scrape waits for the queue-depth source (default 5000 ms). */
  queueDepthTimeoutMs?: number;
  /** Distinct `error_type` values kept before the rest are counted as `other` (default 50). */
  maxErrorTypes?: number;
  /**
   * Tenants whose series carry their own `tenant` label (default 1000); the series of later ones
   * are summed under `tenant="_other"`, so that a pooled process's scrape stays bounded (see TenantLabels).
   */
  maxTenantSeries?: number;
}

export interface StageMetricLabels {
  stage: string;
  /** The logical input queue. */
  queue: string;
  /** The tenant; absent, null or `""` for a shared queue. */
  tenant?: string | null;
  /** Outputs whose `published` series should exist (at 0) from the start. */
  outputs?: readonly string[];
}

/** The metrics of one stage instance; every method is cheap enough for the hot path. */
export interface InstanceMetrics {
  /** A delivery was taken from the input queue and handed to the stage. */
  consumed(): void;
  /** The handler returned normally after `seconds`. */
  completed(seconds: number): void;
  /** The handler threw after `seconds`; `errorType` is the OJS error type (e.g. `HANDLER_ERROR`, `TypeError`). */
  failed(seconds: number, errorType: string): void;
  /** A failed job was scheduled for another attempt. */
  retried(): void;
  /** A job was dead-lettered. */
  deadLettered(): void;
  /** A job was discarded on purpose. */
  discarded(): void;
  /** A job emitted to the logical queue `output` was confirmed by the broker. */
  published(output: string): void;
  /** An input delivery was acknowledged. */
  acked(): void;
}

/** One stage instance (one tenant of a pooled process) as a scrape sees it. */
export interface RunnerSample {
  stage: string;
  queue: string;
  /** '' for a shared queue. */
  tenant: string;
  consuming: boolean;
  inFlight: number;
}

/** One queue's depth, as a {@link QueueDepthSource} reports it. */
export interface QueueDepthSample {
  stage: string;
  /** The logical queue. */
  queue: string;
  /** The tenant, absent or `""` for a shared queue. */
  tenant?: string | null;
  /** The queue's name on the broker (`ojs.queue.conversions.acme.pdf`). */
  physicalQueue: string;
  /** Messages ready for delivery: what RabbitMQ counts against `max-length` (unacknowledged ones do not count). */
  depth: number;
  /**
   * The `max_size` (messages) in force on the broker (its policy, or a `x-max-length` argument);
   * absent when the queue is unlimited or the source could not tell.
   */
  maxSize?: number;
}

export type QueueDepthSource = () => Promise<readonly QueueDepthSample[]> | readonly QueueDepthSample[];
