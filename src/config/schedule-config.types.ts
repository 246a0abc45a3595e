import type { RetryPolicy } from './retry-policy.types.js';

/**
 * What a schedule does when an occurrence comes while the previous one's job is still going
 * (OJS cron section 6): `skip` the new occurrence (the default), `allow` it alongside,
 * `cancel_previous` (cancel the running job, then enqueue), or `enqueue` it to wait in the queue.
 */
export type OverlapPolicy = 'skip' | 'allow' | 'cancel_previous' | 'enqueue';

export const OVERLAP_POLICIES: readonly OverlapPolicy[] = ['skip', 'allow', 'cancel_previous', 'enqueue'];

/**
 * One schedule as the configuration file writes it under `schedules.<name>` (docs/schedules.md),
 * and as `POST /ojs/v1/cron` and `stagecoach cron add` take it once read.
 */
export interface ScheduleConfig {
  /**
   * When it fires: a cron expression of 5 fields (minute hour day-of-month month day-of-week) or
   * 6 (seconds first), an alias (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`), or
   * `@every <duration>` (`@every 30m`, at least 1 s).
   */
  cron: string;
  /** IANA time zone the expression is read in; a tenant's own `timezone` wins for its jobs. @defaultValue "UTC" */
  timezone?: string;
  /** Logical queue of the jobs it enqueues. @defaultValue "default" */
  queue?: string;
  /** Job type of the jobs it enqueues. */
  type: string;
  /** Arguments of every job, a JSON array. @defaultValue [] */
  args?: unknown[];
  /** Meta of every job (beside `cron_name` and `cron_triggered_at`, which it always carries). @defaultValue {} */
  meta?: Record<string, unknown>;
  /** Job priority. @defaultValue none */
  priority?: number;
  /** Execution timeout of every job, in seconds. @defaultValue the queue's */
  timeout?: number;
  /** Retry policy of every job. @defaultValue the queue's */
  retry?: RetryPolicy;
  /**
   * `"*"`: one job per tenant per occurrence, for every tenant configured or provisioned at that
   * occurrence; a list: for those tenants. @defaultValue none: one job per occurrence, without a tenant
   */
  tenants?: '*' | string[];
  /**
   * With `tenants`: the tenants' jobs are spread over this window after each occurrence, ISO 8601
   * duration, each tenant at the same offset every time. At most a day. @defaultValue "PT0S"
   */
  spread?: string;
  /** @defaultValue "skip" */
  overlap_policy?: OverlapPolicy;
  /**
   * Each occurrence's job (per tenant) starts a batch (docs/batches.md): overlap then means "the
   * previous occurrence's batch is still open", not only "its first job is still going". @defaultValue false
   */
  batch?: boolean;
  /** A disabled schedule stays registered and does not fire. @defaultValue true */
  enabled?: boolean;
  /** For people: what the schedule is for. @defaultValue none */
  description?: string;
}

/** A schedule checked and complete (config/compile-schedule.ts): every default filled in. */
export interface ScheduleDefinition {
  name: string;
  /**
   * The tenant whose HTTP token registered it: it fires for that tenant only, and only that
   * tenant's token (and the admin's) sees it. Names are unique per owner.
   */
  owner?: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  args: unknown[];
  meta?: Record<string, unknown>;
  priority?: number;
  timeout?: number;
  retry?: RetryPolicy;
  tenants?: '*' | string[];
  /** ISO 8601 duration; absent: no spread. */
  spread?: string;
  overlap_policy: OverlapPolicy;
  batch: boolean;
  enabled: boolean;
  description?: string;
}
