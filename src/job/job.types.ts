import type { JobState } from './job-states.js';
import type { RetryPolicy } from '../config/config.types.js';

/** OJS structured error (OJS core "Structured errors"). */
export interface JobError {
  type: string;
  message: string;
  backtrace?: string[];
}

/** An OJS job envelope as it travels in a message body (OJS core section 5; docs/broker.md). */
export interface Job {
  specversion: string;
  /** UUIDv7. */
  id: string;
  type: string;
  /** Logical queue name. */
  queue: string;
  args: unknown[];
  meta: Record<string, unknown>;
  /** OJS priority: an integer, higher first, 0 when absent (its AMQP priority: amqp-priority.ts). */
  priority?: number;
  /** Execution timeout, in seconds. */
  timeout?: number;
  retry?: RetryPolicy;
  /** ISO 8601 timestamp. */
  scheduled_at?: string;
  /** Time the job may wait in its queue before it expires, ISO 8601 duration. */
  enqueue_ttl?: string;
  /** ISO 8601 timestamp: past it the job is discarded unrun, wherever it waits (OJS core `expires_at`). */
  expires_at?: string;
  /** 1 on the first delivery, +1 for every retry or redelivery after a crash. */
  attempt: number;
  /** ISO 8601 timestamp. */
  created_at: string;
  tenant?: string;
  /** Set on dead letters. */
  error?: JobError;
  /** Labels for filtering and observability (`job list --tag`, `?tag=`); they do not change how it runs. */
  tags?: string[];
  /** Its own limit (OJS rate-limiting extension), carried in header `x-ojs-rate-limit` too. */
  rate_limit?: RateLimitPolicy;
  /** Its uniqueness policy (OJS unique-jobs extension; docs/unique-jobs.md), checked at enqueue. */
  unique?: UniquePolicy;
  /**
   * A workflow step's input (spec/ojs-workflows.md 7; docs/workflows.md): the results of the step
   * before it. Above the queue's payload threshold it travels by reference (`meta.parent_results_ref`)
   * and is loaded back before the handler runs.
   */
  parent_results?: unknown[];
}

/**
 * A job's own limit (OJS rate-limiting extension 6.1; docs/flow-control.md): jobs with the same
 * `key` share it, across every process. A limit configured under the same key in `limits` wins
 * over the numbers a job carries.
 */
export interface RateLimitPolicy {
  /** The partition: `^[a-zA-Z0-9][a-zA-Z0-9._:-]*$`. */
  key: string;
  /** Most jobs of the key active at once; 0 holds them all. */
  concurrency?: number;
  /** Most starts in any window of `period` (ISO 8601, 10 ms to 1 day). */
  rate?: { limit: number; period: string };
  /** Starts spaced at least `period / limit` apart. */
  throttle?: { limit: number; period: string };
  /**
   * When the limit is reached: `wait` (the job waits, no attempt counted), `reschedule` (it goes
   * back to the broker, to come again after about a window), `drop` (discarded, lossy: counted
   * and evented as `rate_limit.dropped`). @defaultValue "wait"
   */
  on_limit?: 'wait' | 'reschedule' | 'drop';
}

export type UniqueDimension = 'type' | 'queue' | 'args' | 'meta';
export type UniqueConflict = 'reject' | 'replace' | 'replace_except_schedule' | 'ignore';
/** The OJS lifecycle states a policy may name. */
export type UniqueState = JobState;

/** A job's `unique` (OJS UniquePolicy, section 2): every field optional. */
export interface UniquePolicy {
  /** Dimensions of the key; `type` (and, in stagecoach, the tenant) always count. @defaultValue ["type"] */
  keys?: UniqueDimension[];
  /** With `args` in `keys`: the keys of the job's first argument (an object) that count. @defaultValue all of `args` */
  args_keys?: string[];
  /**
   * ojs-core's and the official SDKs' spelling, instead of `keys` and `args_keys`: dimension
   * names count those dimensions, any other name is a key of the first argument (docs/unique-jobs.md).
   */
  key?: string[];
  /** With `meta` in `keys` (required then): the keys of `meta` that count. */
  meta_keys?: string[];
  /** ISO 8601 duration (days to seconds) from the first job's enqueue. @defaultValue none: no expiry */
  period?: string;
  /** States of the first job in which a second is a duplicate. @defaultValue the five not ended */
  states?: UniqueState[];
  /** @defaultValue "reject" */
  on_conflict?: UniqueConflict;
}

/** Header values stagecoach sets on messages. */
export type HeaderValue = string | number | boolean;

/** What a producer writes: `ctx.emit(output, spec)` or `publisher.publish(queue, spec)`. */
export interface JobSpec {
  type: string;
  args?: unknown[];
  meta?: Record<string, unknown>;
  priority?: number;
  /** Seconds. */
  timeout?: number;
  retry?: RetryPolicy;
  /**
   * ISO 8601 timestamp with a time zone. At least half a second ahead, the job waits on the
   * broker's delay ladder until then (whole seconds, at most about 12 days ahead: later is an
   * INVALID_REQUEST); see docs/scheduling.md.
   */
  scheduled_at?: string;
  /** How long the job may wait in its queue before it expires, ISO 8601 duration; not applied to a scheduled job. */
  enqueue_ttl?: string;
  /**
   * ISO 8601 timestamp with a time zone: a job not started by then is discarded unrun (reported
   * `discarded`, error type `JOB_EXPIRED`), whether it waits in its queue, on the delay ladder or
   * for an HTTP worker's fetch. @defaultValue none
   */
  expires_at?: string;
  /** Extra AMQP headers, e.g. the variant header (`mime`). */
  headers?: Record<string, HeaderValue>;
  /** Labels kept on the job and in the job store (`job list --tag`): at most 32, each 1 to 128 characters. @defaultValue none */
  tags?: string[];
  /** Its own limit, shared with every job of the same key (docs/flow-control.md). @defaultValue none */
  rate_limit?: RateLimitPolicy;
  /**
   * A second job with the same key within the window is refused, or answered with the first
   * one's id (docs/unique-jobs.md). Needs the PostgreSQL job store. @defaultValue none
   */
  unique?: UniquePolicy;
}

/** What a handler emits: `ctx.emit(output, spec)`. */
export interface EmitSpec extends JobSpec {
  /**
   * Starts a new batch with this job as its root (docs/batches.md): it is reported as created
   * before it is sent, and every job emitted downstream of it joins the new batch, which belongs
   * to the emitting job's tenant. It leaves the emitting job's own batch: that batch does not wait
   * for it. Absent (or the emitting job's batch), the job joins its parent's batch, if any.
   */
  batch?: string;
}

/** A job for `Publisher.publish()`: a spec with its tenant (required for tenant-scoped queues). */
export interface PublishSpec extends JobSpec {
  tenant?: string;
  /** W3C traceparent to continue; a new trace is started when absent. */
  traceparent?: string;
  /**
   * Starts the job in this batch (`meta.batch`, header `x-ojs-batch`): every job emitted
   * downstream of it joins the batch, and the publisher reports it as created to the tracking
   * stream before publishing it (docs/batches.md). A batch belongs to one tenant.
   */
  batch?: string;
  /**
   * Held, not enqueued (OJS `pending`): the job waits on the broker, in the parked queue, until
   * it is activated (`POST /ojs/v1/jobs/{id}/activate`; docs/http-binding.md), then goes to its
   * queue as any job. @defaultValue false
   */
  pending?: boolean;
  /**
   * Jobs the batch tracker publishes when the batch completes (OJS batch workflow callbacks);
   * only with `batch`. Recorded in the root's `created` report (docs/batches.md, Callbacks).
   */
  callbacks?: BatchCallbacks;
}

/** The names of the OJS batch callbacks. */
export type CallbackName = 'on_complete' | 'on_success' | 'on_failure';

/**
 * A callback job as a batch declares it: where it goes and what it is. It is published with the
 * batch's tenant (`tenant`, when given, must be that tenant), outside the batch, with an id made
 * from the batch id and the callback's name (docs/batches.md, Callbacks).
 */
export interface CallbackSpec {
  queue: string;
  type: string;
  args?: unknown[];
  tenant?: string;
  meta?: Record<string, unknown>;
  /** AMQP headers, e.g. the variant header. */
  headers?: Record<string, HeaderValue>;
}

/** OJS batch callbacks: `on_complete` always, `on_success` when no job failed, `on_failure` when one did. */
export type BatchCallbacks = Partial<Record<CallbackName, CallbackSpec>>;
