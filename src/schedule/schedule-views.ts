import type { CompiledConfig } from '../config/config.types.js';
import { clockOf } from '../cron/time-zone.js';
import { ruleOf } from './fire-plan.js';
import type { BookEntry, ScheduleBook } from './schedule-book.js';
import type { OccurrenceSummary, ScheduleOrigin } from './schedule-records.js';

/**
 * A schedule as the API, the command line and the dashboard show it: the fields of both OJS
 * shapes (the cron spec's `cron`, `type`, `args`, `options`, and openapi's `expression`,
 * `job_template`), stagecoach's own (`tenants`, `spread`, `batch`, `tenant`, `origin`), and its
 * state: `next_run_at` (null while disabled), `last_run_at`, `run_count` (jobs it enqueued),
 * `occurrences` (the latest, newest first).
 */
export interface ScheduleView {
  name: string;
  expression: string;
  cron: string;
  timezone: string;
  overlap_policy: string;
  enabled: boolean;
  description?: string;
  type: string;
  args: unknown[];
  options: Record<string, unknown>;
  job_template: { type: string; args: unknown[]; options: Record<string, unknown>; meta?: Record<string, unknown> };
  tenant?: string;
  tenants?: '*' | string[];
  spread?: string;
  batch: boolean;
  origin: ScheduleOrigin;
  next_run_at: string | null;
  last_run_at: string | null;
  run_count: number;
  created_at: string;
  updated_at: string;
  occurrences: OccurrenceSummary[];
}

export function scheduleView(entry: BookEntry, config: CompiledConfig, now: number = Date.now()): ScheduleView {
  const s = entry.schedule;
  const options: Record<string, unknown> = {
    queue: s.queue,
    ...(s.priority === undefined ? {} : { priority: s.priority }),
    ...(s.timeout === undefined ? {} : { timeout: s.timeout, timeout_ms: s.timeout * 1000 }),
    ...(s.retry === undefined ? {} : { retry: s.retry }),
  };
  return {
    name: s.name,
    expression: s.cron,
    cron: s.cron,
    timezone: s.timezone,
    overlap_policy: s.overlap_policy,
    enabled: entry.enabled,
    ...(s.description === undefined ? {} : { description: s.description }),
    type: s.type,
    args: s.args,
    options,
    job_template: { type: s.type, args: s.args, options, ...(s.meta === undefined ? {} : { meta: s.meta }) },
    ...(s.owner === undefined ? {} : { tenant: s.owner }),
    ...(s.tenants === undefined ? {} : { tenants: s.tenants }),
    ...(s.spread === undefined ? {} : { spread: s.spread }),
    batch: s.batch,
    origin: entry.origin,
    next_run_at: nextRunOf(entry, config, now),
    last_run_at: entry.last_run_at ?? null,
    run_count: entry.run_count,
    created_at: entry.created_at,
    updated_at: entry.updated_at,
    occurrences: entry.recent,
  };
}

/**
 * The next occurrence after `now` (the first of its tenants' jobs, without their spread), in the
 * schedule's zone and in each of its configured tenants' own; null while disabled.
 */
export function nextRunOf(entry: BookEntry, config: CompiledConfig, now: number = Date.now()): string | null {
  if (!entry.enabled) return null;
  const rule = ruleOf(entry.schedule.cron);
  const created = Date.parse(entry.created_at);
  const { tenants, owner, timezone } = entry.schedule;
  const zones = new Set<string>();
  if (owner !== undefined) zones.add(config.tenantZones.get(owner) ?? timezone);
  else {
    zones.add(timezone);
    if (tenants !== undefined && !rule.interval) {
      for (const [tenant, zone] of config.tenantZones) if (tenants === '*' || tenants.includes(tenant)) zones.add(zone);
    }
  }
  let next: number | undefined;
  for (const zone of zones) {
    const at = rule.next(Math.max(now, created, entry.enabledAt), clockOf(rule.interval ? 'UTC' : zone), created);
    if (at !== undefined && (next === undefined || at < next)) next = at;
  }
  return next === undefined ? null : new Date(next).toISOString();
}

/**
 * The schedules to show: the book's, and the configuration file's that no leader has registered
 * yet (none ran since the file named them), as they will be once one does.
 */
export function listedEntries(book: ScheduleBook, config: CompiledConfig, now: number = Date.now()): BookEntry[] {
  const entries = [...book.entries.values()];
  for (const schedule of config.schedules.values()) {
    if (book.entries.has(schedule.name)) continue;
    const at = new Date(now).toISOString();
    entries.push({
      key: schedule.name,
      schedule,
      origin: 'config',
      created_at: at,
      updated_at: at,
      enabled: schedule.enabled,
      enabledAt: now,
      run_count: 0,
      handled: new Map(),
      lastJobs: new Map(),
      recent: [],
    });
  }
  return entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
