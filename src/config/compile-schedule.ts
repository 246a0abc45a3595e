import { parseCron } from '../cron/cron-expression.js';
import { checkTimeZone } from '../cron/time-zone.js';
import { ConfigError, StagecoachError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';
import { matchesAny } from '../util/patterns.js';
import { isTenantSlug, notATenantSlug } from '../util/tenant-slug.js';
import { isQueueName, QUEUE_NAME_RULE } from '../util/queue-name.js';
import type { CompiledConfig, ResolvedQueueConfig } from './compiled-config.types.js';
import type { TenantConfig } from './raw-config.types.js';
import { queueFor } from './queue-resolver.js';
import { OVERLAP_POLICIES, type OverlapPolicy, type ScheduleConfig, type ScheduleDefinition } from './schedule-config.types.js';

/** OJS cron 2.2: a schedule's name, also a URL segment (`DELETE /ojs/v1/cron/{name}`). */
export const SCHEDULE_NAME = /^[a-z0-9][a-z0-9.-]{0,254}$/;
/** OJS job types: dot-separated lowercase segments (hyphens and `_` allowed after the first character). */
const JOB_TYPE = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$/;
/** The longest `spread`: a day. */
const MAX_SPREAD_MS = 86_400_000;
/** The largest `args` a schedule may carry, encoded: every occurrence copies them into a job and a record. */
export const MAX_SCHEDULE_ARGS_BYTES = 64 * 1024;
/** The queue of a schedule that names none (OJS core's default queue). */
export const DEFAULT_SCHEDULE_QUEUE = 'default';

function invalid(where: string, reason: string): StagecoachError {
  return new StagecoachError('INVALID_REQUEST', `${where}: ${reason}`);
}

/**
 * Checks a schedule as written and fills in its defaults (docs/schedules.md). Every rule that
 * does not need the configuration: the name, the expression (OJS cron 3.5: rejected at
 * registration, with the reason), the time zone (IANA names only), the job's fields, `tenants`,
 * `spread`, `overlap_policy`.
 * @param where how errors name it, e.g. `schedules.nightly-scan`.
 * @throws StagecoachError INVALID_REQUEST naming the field and what was expected.
 */
export function compileSchedule(name: string, raw: ScheduleConfig, where: string, owner?: string): ScheduleDefinition {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalid(where, 'a schedule must be a JSON object');
  if (typeof name !== 'string' || !SCHEDULE_NAME.test(name)) {
    throw invalid(where, `"name" must be lowercase letters, digits, "-" and "." (${SCHEDULE_NAME.source}), got ${JSON.stringify(name)}`);
  }
  try {
    parseCron(raw.cron);
  } catch (err) {
    throw invalid(`${where}.cron`, (err as Error).message);
  }
  const timezone = checkTimeZone(raw.timezone ?? 'UTC', `${where}.timezone`);
  if (typeof raw.type !== 'string' || !JOB_TYPE.test(raw.type)) {
    throw invalid(`${where}.type`, `a job type such as "scan.start" (${JOB_TYPE.source}), got ${JSON.stringify(raw.type) ?? 'nothing'}`);
  }
  const queue = raw.queue ?? DEFAULT_SCHEDULE_QUEUE;
  if (!isQueueName(queue)) throw invalid(`${where}.queue`, `a queue name (${QUEUE_NAME_RULE}), got ${JSON.stringify(queue)}`);
  const args = raw.args ?? [];
  if (!Array.isArray(args)) throw invalid(`${where}.args`, 'a JSON array');
  if (Buffer.byteLength(JSON.stringify(args)) > MAX_SCHEDULE_ARGS_BYTES) {
    throw invalid(`${where}.args`, `at most ${MAX_SCHEDULE_ARGS_BYTES} bytes as JSON: pass a reference to larger data`);
  }
  if (raw.meta !== undefined && (typeof raw.meta !== 'object' || raw.meta === null || Array.isArray(raw.meta))) {
    throw invalid(`${where}.meta`, 'a JSON object');
  }
  if (raw.priority !== undefined && !Number.isInteger(raw.priority)) throw invalid(`${where}.priority`, 'an integer');
  if (raw.timeout !== undefined && !(typeof raw.timeout === 'number' && raw.timeout > 0)) {
    throw invalid(`${where}.timeout`, 'a positive number of seconds');
  }
  // `retry` is checked by the schema (configuration file) or the API (retry/retry-policy.ts), which know its rules.
  if (raw.retry !== undefined && (typeof raw.retry !== 'object' || raw.retry === null || Array.isArray(raw.retry))) {
    throw invalid(`${where}.retry`, 'a retry policy object');
  }
  const tenants = checkTenants(raw.tenants, where);
  if (owner !== undefined && tenants !== undefined) {
    throw invalid(`${where}.tenants`, `a tenant's schedule fires for its own tenant ("${owner}") only: leave "tenants" out`);
  }
  if (raw.spread !== undefined) {
    const ms = typeof raw.spread === 'string' ? parseDuration(raw.spread) : undefined;
    if (ms === undefined || ms > MAX_SPREAD_MS) throw invalid(`${where}.spread`, `an ISO 8601 duration of at most a day, such as "PT30M"`);
    if (tenants === undefined && ms > 0) throw invalid(`${where}.spread`, 'spreads the jobs of several tenants: give "tenants" too');
  }
  const overlap = raw.overlap_policy ?? 'skip';
  if (!OVERLAP_POLICIES.includes(overlap)) {
    throw invalid(`${where}.overlap_policy`, `one of ${OVERLAP_POLICIES.join(', ')}, got ${JSON.stringify(overlap)}`);
  }
  for (const flag of ['batch', 'enabled'] as const) {
    if (raw[flag] !== undefined && typeof raw[flag] !== 'boolean') throw invalid(`${where}.${flag}`, 'true or false');
  }
  if (raw.description !== undefined && typeof raw.description !== 'string') throw invalid(`${where}.description`, 'a string');
  return {
    name,
    ...(owner === undefined ? {} : { owner }),
    cron: raw.cron.trim(),
    timezone,
    queue,
    type: raw.type,
    args,
    ...(raw.meta === undefined ? {} : { meta: raw.meta }),
    ...(raw.priority === undefined ? {} : { priority: raw.priority }),
    ...(raw.timeout === undefined ? {} : { timeout: raw.timeout }),
    ...(raw.retry === undefined ? {} : { retry: raw.retry }),
    ...(tenants === undefined ? {} : { tenants }),
    ...(raw.spread === undefined || parseDuration(raw.spread) === 0 ? {} : { spread: raw.spread }),
    overlap_policy: overlap as OverlapPolicy,
    batch: raw.batch ?? false,
    enabled: raw.enabled ?? true,
    ...(raw.description === undefined ? {} : { description: raw.description }),
  };
}

function checkTenants(tenants: unknown, where: string): '*' | string[] | undefined {
  if (tenants === undefined || tenants === '*') return tenants;
  if (!Array.isArray(tenants) || tenants.length === 0) throw invalid(`${where}.tenants`, '"*" or a non-empty list of tenant slugs');
  for (const [index, tenant] of tenants.entries()) {
    if (!isTenantSlug(tenant)) throw invalid(`${where}.tenants.${index}`, notATenantSlug(tenant));
  }
  return [...new Set(tenants as string[])];
}

/**
 * The rules that need the configuration: the queue exists (or may be made implicitly), a
 * tenant-scoped queue's jobs have tenants, the queue takes the job type.
 * @throws StagecoachError INVALID_REQUEST naming the schedule.
 */
export function checkScheduleTarget(config: CompiledConfig, schedule: ScheduleDefinition, where: string): void {
  let queue: ResolvedQueueConfig;
  try {
    queue = queueFor(config, schedule.queue, `schedule "${schedule.name}"`);
  } catch (err) {
    throw invalid(`${where}.queue`, (err as Error).message);
  }
  if (queue.scope === 'tenant' && schedule.tenants === undefined && schedule.owner === undefined) {
    throw invalid(
      `${where}.tenants`,
      `queue "${schedule.queue}" is tenant-scoped: give "tenants" ("*" or a list) so that each job has a tenant`,
    );
  }
  const allowed = queue.allowed_job_types;
  if (allowed !== undefined && !matchesAny(allowed, schedule.type)) {
    throw invalid(`${where}.type`, `queue "${schedule.queue}" does not allow job type "${schedule.type}"`);
  }
}

/** `tenants[].timezone`, checked (IANA names only, as a schedule's). */
export function tenantZones(source: string, entries: ReadonlyArray<string | TenantConfig>): Map<string, string> {
  const zones = new Map<string, string>();
  entries.forEach((entry, index) => {
    if (typeof entry === 'string' || entry.timezone === undefined) return;
    try {
      zones.set(entry.name, checkTimeZone(entry.timezone));
    } catch (err) {
      throw new ConfigError(source, `tenants.${index}.timezone`, (err as Error).message.replace(/^timezone: /, ''));
    }
  });
  return zones;
}

export function compileSchedules(
  source: string,
  schedules: Record<string, ScheduleConfig>,
  config: CompiledConfig,
): Map<string, ScheduleDefinition> {
  const compiled = new Map<string, ScheduleDefinition>();
  for (const [name, raw] of Object.entries(schedules)) {
    try {
      const schedule = compileSchedule(name, raw, `schedules.${name}`);
      checkScheduleTarget(config, schedule, `schedules.${name}`);
      compiled.set(name, schedule);
    } catch (err) {
      // The message names the key: `schedules.<name>.<field>: what was expected`.
      const [key, ...rest] = (err as Error).message.split(': ');
      throw new ConfigError(source, key as string, rest.join(': '));
    }
  }
  return compiled;
}
