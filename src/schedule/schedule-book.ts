import type { ScheduleDefinition } from '../config/config.types.js';
import type { BookSnapshot, OccurrenceSummary, ScheduleOrigin, ScheduleRecord, SnapshotEntry, TriggerRecord } from './schedule-records.js';
import { scheduleKey } from './schedule-records.js';
import type { QueuePool } from '../queue-pools/queue-pool.js';
import type { WebhookSubscription } from '../webhooks/webhook-subscription.js';

/** Occurrences remembered per schedule for people (`cron list`, the dashboard). */
const RECENT = 10;
/**
 * Records kept since the last snapshot, to fold again after a snapshot that does not cover them.
 * Only those appended between the leader's capture and its snapshot's append are needed: a
 * confirm's round trip, far fewer than this.
 */
const KEPT_SINCE_SNAPSHOT = 1000;

/** One schedule's state, folded from the stream. */
export interface BookEntry {
  readonly key: string;
  schedule: ScheduleDefinition;
  origin: ScheduleOrigin;
  created_at: string;
  updated_at: string;
  enabled: boolean;
  /** When it was last enabled (or registered), epoch ms: occurrences before are not caught up. */
  enabledAt: number;
  run_count: number;
  last_run_at?: string;
  /** Tenant (`""` for none) -> the last occurrence handled (fired or skipped), epoch ms. */
  handled: Map<string, number>;
  /** Tenant -> the job of its last fired occurrence (what overlap asks about). */
  lastJobs: Map<string, string>;
  recent: OccurrenceSummary[];
}

/** What changed for the leader's plan (ScheduleBook.onChange): a schedule's definition or the tenants, not an occurrence. */
export type BookChange = 'schedules' | 'tenants' | 'occurrence' | 'trigger' | 'webhooks';

/**
 * The state of every schedule, folded from the schedules stream (schedule-records.ts) in stream
 * order. Every process that needs schedules keeps one: the leader, the admin API, `cron list`.
 * A `snapshot` replaces everything up to the record it covers (`covers`, the last one the leader
 * had folded when it took the snapshot); the records after that one but before the snapshot, which
 * other processes appended while the snapshot was on its way, are folded again over it, so none
 * is lost. Records about a schedule that is not registered (removed meanwhile, or before the
 * oldest snapshot the stream still holds) are ignored.
 */
export class ScheduleBook {
  readonly entries = new Map<string, BookEntry>();
  /** Tenant -> when it joined while a leader ran, epoch ms. */
  readonly joined = new Map<string, number>();
  /** Triggers not yet fired, in order. */
  readonly triggers: TriggerRecord[] = [];
  /** Webhook subscriptions by id (docs/webhooks.md): registrations made over HTTP, kept beside the schedules. */
  readonly webhooks = new Map<string, WebhookSubscription>();
  /** Queue pools for HTTP workers by name (docs/http-binding.md "Queue pools"), made over HTTP as well. */
  readonly queuePools = new Map<string, QueuePool>();
  /** The last process that became the leader (it may have gone since: see leader-probe.ts). */
  leader: { process: string; at: string } | undefined;
  /** Records folded since the last snapshot: the leader writes one past a bound. */
  sinceSnapshot = 0;
  /** The id of the last record folded: what a snapshot taken now covers. */
  lastId: string | undefined;
  /** The records folded since the last snapshot, the latest KEPT_SINCE_SNAPSHOT of them. */
  private kept: ScheduleRecord[] = [];
  private keptDropped = false;
  private readonly listeners = new Set<(change: BookChange, record: ScheduleRecord) => void>();
  private readonly dropListeners = new Set<(covers: string) => void>();

  onChange(listener: (change: BookChange, record: ScheduleRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Folds the next record of the stream. */
  apply(record: ScheduleRecord): void {
    this.lastId = record.id;
    if (record.kind === 'snapshot') {
      const uncovered = this.uncovered(record.covers);
      this.kept = [];
      this.keptDropped = false;
      this.folded(record);
      for (const again of uncovered) this.folded(again);
      return;
    }
    this.kept.push(record);
    if (this.kept.length > KEPT_SINCE_SNAPSHOT) {
      this.kept.shift();
      this.keptDropped = true;
    }
    this.folded(record);
  }

  /**
   * A snapshot's records to fold again: those kept after the one it covers. When that one is not
   * kept, it came before every record kept (this reader started past it): all of them.
   */
  private uncovered(covers: string | undefined): ScheduleRecord[] {
    // Written without `covers`: it replaces everything before it.
    if (covers === undefined) return [];
    const index = this.kept.findIndex((record) => record.id === covers);
    if (index >= 0) return this.kept.slice(index + 1);
    if (this.keptDropped) {
      // More than KEPT_SINCE_SNAPSHOT records between the capture and the snapshot: the oldest of them are lost.
      for (const listener of this.dropListeners) listener(covers);
    }
    return this.kept;
  }

  /** Told when a snapshot covers a record older than those kept (records lost; see KEPT_SINCE_SNAPSHOT). */
  onDropped(listener: (covers: string) => void): () => void {
    this.dropListeners.add(listener);
    return () => this.dropListeners.delete(listener);
  }

  private folded(record: ScheduleRecord): void {
    const change = this.fold(record);
    if (record.kind !== 'mark' && record.kind !== 'leader') this.sinceSnapshot++;
    if (change !== undefined) for (const listener of this.listeners) listener(change, record);
  }

  private fold(record: ScheduleRecord): BookChange | undefined {
    const at = Date.parse(record.at);
    switch (record.kind) {
      case 'put': {
        const key = scheduleKey(record.schedule);
        const entry = this.entries.get(key);
        if (entry === undefined) {
          this.entries.set(key, {
            key,
            schedule: record.schedule,
            origin: record.origin,
            created_at: record.at,
            updated_at: record.at,
            enabled: record.schedule.enabled,
            enabledAt: at,
            run_count: 0,
            handled: new Map(),
            lastJobs: new Map(),
            recent: [],
          });
        } else {
          if (record.schedule.enabled && !entry.enabled) entry.enabledAt = at;
          entry.schedule = record.schedule;
          entry.origin = record.origin;
          entry.updated_at = record.at;
          entry.enabled = record.schedule.enabled;
        }
        return 'schedules';
      }
      case 'remove':
        return this.entries.delete(record.key) ? 'schedules' : undefined;
      case 'toggle': {
        const entry = this.entries.get(record.key);
        if (entry === undefined) return undefined;
        if (record.enabled && !entry.enabled) entry.enabledAt = at;
        entry.enabled = record.enabled;
        return 'schedules';
      }
      case 'fired':
      case 'skipped':
        return this.occurrence(record);
      case 'trigger':
        if (!this.entries.has(record.key)) return undefined;
        this.triggers.push(record);
        return 'trigger';
      case 'webhook':
        this.webhooks.set(record.subscription.id, record.subscription);
        return 'webhooks';
      case 'unhook':
        return this.webhooks.delete(record.subscription) ? 'webhooks' : undefined;
      case 'pool':
        this.queuePools.set(record.pool.name, record.pool);
        return undefined;
      case 'unpool':
        this.queuePools.delete(record.name);
        return undefined;
      case 'joined':
        this.joined.set(record.tenant, at);
        return 'tenants';
      case 'left':
        this.joined.delete(record.tenant);
        for (const entry of this.entries.values()) {
          entry.handled.delete(record.tenant);
          entry.lastJobs.delete(record.tenant);
        }
        return 'tenants';
      case 'snapshot':
        this.restore(record.state);
        this.sinceSnapshot = 0;
        return 'schedules';
      case 'clear':
        this.entries.clear();
        this.joined.clear();
        this.triggers.length = 0;
        this.webhooks.clear();
        this.queuePools.clear();
        return 'schedules';
      case 'leader':
        this.leader = { process: record.process, at: record.at };
        return undefined;
      case 'mark':
        return undefined;
    }
  }

  private occurrence(record: Extract<ScheduleRecord, { kind: 'fired' | 'skipped' }>): BookChange | undefined {
    const entry = this.entries.get(record.key);
    if (entry === undefined) return undefined;
    const tenant = record.tenant ?? '';
    const occurrence = Date.parse(record.occurrence);
    if (record.kind === 'fired') {
      entry.run_count++;
      entry.last_run_at = record.at;
      entry.lastJobs.set(tenant, record.job);
      if (record.trigger !== undefined) {
        const index = this.triggers.findIndex((trigger) => trigger.id === record.trigger);
        if (index >= 0) this.triggers.splice(index, 1);
      }
    }
    const manual = record.kind === 'fired' && record.trigger !== undefined;
    if (!manual && occurrence > (entry.handled.get(tenant) ?? -Infinity)) entry.handled.set(tenant, occurrence);
    let summary = entry.recent.find((known) => known.occurrence === record.occurrence && (known.manual === true) === manual);
    if (summary === undefined) {
      summary = { occurrence: record.occurrence, fired: 0, skipped: 0, ...(manual ? { manual: true } : {}) };
      entry.recent.push(summary);
      entry.recent.sort((a, b) => (a.occurrence < b.occurrence ? 1 : a.occurrence > b.occurrence ? -1 : 0));
      if (entry.recent.length > RECENT) entry.recent.length = RECENT;
    }
    if (record.kind === 'fired') {
      summary.fired++;
      summary.job ??= record.job;
    } else summary.skipped++;
    return 'occurrence';
  }

  /** The whole state, for a `snapshot` record. */
  snapshot(): BookSnapshot {
    const entries: SnapshotEntry[] = [];
    for (const entry of this.entries.values()) {
      entries.push({
        schedule: entry.schedule,
        origin: entry.origin,
        created_at: entry.created_at,
        updated_at: entry.updated_at,
        enabled: entry.enabled,
        enabled_at: new Date(entry.enabledAt).toISOString(),
        run_count: entry.run_count,
        ...(entry.last_run_at === undefined ? {} : { last_run_at: entry.last_run_at }),
        handled: Object.fromEntries(entry.handled),
        last_jobs: Object.fromEntries(entry.lastJobs),
        recent: entry.recent,
      });
    }
    return {
      entries,
      joined: Object.fromEntries(this.joined),
      triggers: [...this.triggers],
      webhooks: [...this.webhooks.values()],
      queue_pools: [...this.queuePools.values()],
    };
  }

  private restore(state: BookSnapshot): void {
    this.entries.clear();
    this.joined.clear();
    for (const [tenant, at] of Object.entries(state.joined)) this.joined.set(tenant, at);
    for (const saved of state.entries) {
      const key = scheduleKey(saved.schedule);
      this.entries.set(key, {
        key,
        schedule: saved.schedule,
        origin: saved.origin,
        created_at: saved.created_at,
        updated_at: saved.updated_at,
        enabled: saved.enabled,
        enabledAt: Date.parse(saved.enabled_at),
        run_count: saved.run_count,
        ...(saved.last_run_at === undefined ? {} : { last_run_at: saved.last_run_at }),
        handled: new Map(Object.entries(saved.handled)),
        lastJobs: new Map(Object.entries(saved.last_jobs)),
        recent: saved.recent,
      });
    }
    this.triggers.splice(0, this.triggers.length, ...(state.triggers ?? []));
    this.webhooks.clear();
    for (const subscription of state.webhooks ?? []) this.webhooks.set(subscription.id, subscription);
    this.queuePools.clear();
    for (const pool of state.queue_pools ?? []) this.queuePools.set(pool.name, pool);
  }
}
