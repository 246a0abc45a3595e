import { createHash } from 'node:crypto';
import { latestBetween, parseCron, type CronRule } from '../cron/cron-expression.js';
import { clockOf } from '../cron/time-zone.js';
import { parseDuration } from '../util/duration.js';
import type { BookEntry } from './schedule-book.js';

/** One occurrence of a schedule for one tenant (or none), waiting for its time. */
export interface Pending {
  /** When it fires: the occurrence, plus the tenant's offset within `spread`; epoch ms. */
  due: number;
  key: string;
  tenant: string | undefined;
  /** The occurrence, epoch ms: what its job id is derived from. */
  occurrence: number;
  /** The entry's state it was planned from (versionOf): a change makes it stale. */
  version: string;
}

/** What the plan needs besides the entry: tenants' zones, when tenants joined, the latest occurrence handled here. */
export interface PlanContext {
  zoneOf(tenant: string | undefined, schedule: BookEntry['schedule']): string;
  joinedAt(tenant: string): number | undefined;
  /** The last occurrence handled for (key, tenant) by the book or by this leader, whichever is later. */
  handled(entry: BookEntry, tenant: string | undefined): number | undefined;
}

/** The state of an entry a plan was made from: a change to it makes older plans stale. */
export function versionOf(entry: BookEntry): string {
  return `${entry.updated_at}|${entry.enabled}|${entry.enabledAt}`;
}

const rules = new Map<string, CronRule>();

/** A schedule's parsed rule, once per expression (checked at registration: it parses). */
export function ruleOf(cron: string): CronRule {
  let rule = rules.get(cron);
  if (rule === undefined) {
    rule = parseCron(cron);
    if (rules.size > 10_000) rules.clear();
    rules.set(cron, rule);
  }
  return rule;
}

/** A tenant's place in a schedule's `spread`: the same every occurrence, ms in [0, spread). */
export function spreadOffset(key: string, tenant: string | undefined, spreadMs: number): number {
  if (spreadMs <= 0 || tenant === undefined) return 0;
  const hash = createHash('sha256').update(`${key}\u0000${tenant}`).digest();
  return Math.floor((hash.readUInt32BE(0) / 2 ** 32) * spreadMs);
}

export function spreadMsOf(entry: BookEntry): number {
  return entry.schedule.spread === undefined ? 0 : (parseDuration(entry.schedule.spread) ?? 0);
}

/**
 * The next occurrence of (entry, tenant) to fire, seen at `now`: the latest one missed since the
 * last handled (or since the schedule, its enabling or the tenant's joining: what came before is
 * not caught up), due at once; else the next one. At most one catch-up however long the pause
 * (OJS cron 7.3). `gaps` receives the wall times a spring-forward skipped on the way.
 */
export function planOccurrence(
  entry: BookEntry,
  tenant: string | undefined,
  now: number,
  ctx: PlanContext,
  gaps?: number[],
): Pending | undefined {
  const rule = ruleOf(entry.schedule.cron);
  const clock = clockOf(rule.interval ? 'UTC' : ctx.zoneOf(tenant, entry.schedule));
  const created = Date.parse(entry.created_at);
  const offset = spreadOffset(entry.key, tenant, spreadMsOf(entry));
  const joined = tenant === undefined ? undefined : ctx.joinedAt(tenant);
  const since = Math.max(ctx.handled(entry, tenant) ?? -Infinity, created, entry.enabledAt, joined ?? -Infinity);
  const version = versionOf(entry);
  const missed = latestBetween(rule, since, now - offset, clock, created);
  if (missed !== undefined) return { due: missed + offset, key: entry.key, tenant, occurrence: missed, version };
  const next = rule.next(Math.max(since, now - offset), clock, created, gaps);
  return next === undefined ? undefined : { due: next + offset, key: entry.key, tenant, occurrence: next, version };
}

/** The occurrence after `occurrence` (fired or skipped), for the same tenant; undefined when there is none. */
export function planAfter(
  entry: BookEntry,
  tenant: string | undefined,
  occurrence: number,
  now: number,
  ctx: PlanContext,
  gaps?: number[],
): Pending | undefined {
  const rule = ruleOf(entry.schedule.cron);
  const clock = clockOf(rule.interval ? 'UTC' : ctx.zoneOf(tenant, entry.schedule));
  const offset = spreadOffset(entry.key, tenant, spreadMsOf(entry));
  // Never one already behind: a fire that took long does not make the next one a catch-up burst.
  const next = rule.next(Math.max(occurrence, now - offset), clock, Date.parse(entry.created_at), gaps);
  return next === undefined ? undefined : { due: next + offset, key: entry.key, tenant, occurrence: next, version: versionOf(entry) };
}

/** A min-heap of pending occurrences by `due`. */
export class PendingHeap {
  private readonly items: Pending[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): Pending | undefined {
    return this.items[0];
  }

  push(item: Pending): void {
    const items = this.items;
    items.push(item);
    let index = items.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if ((items[parent] as Pending).due <= item.due) break;
      items[index] = items[parent] as Pending;
      index = parent;
    }
    items[index] = item;
  }

  pop(): Pending | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && (items[right] as Pending).due < (items[left] as Pending).due ? right : left;
      if ((items[child] as Pending).due >= last.due) break;
      items[index] = items[child] as Pending;
      index = child;
    }
    items[index] = last;
    return top;
  }

  clear(): void {
    this.items.length = 0;
  }
}
