import type { CompiledConfig } from '../config/config.types.js';
import type { EventPublisher } from '../events/event-publisher.js';
import { cancelJob } from '../directives/cancel-job.js';
import { cancelBatch } from '../directives/batch-directives.js';
import type { Logger } from '../logging/logger.js';
import { planAfter, versionOf, type Pending, type PlanContext } from './fire-plan.js';
import type { OccurrenceFirer } from './occurrence-firer.js';
import { occurrenceId } from './occurrence-id.js';
import { occurrenceJob } from './occurrence-job.js';
import { overlapVerdict, type OverlapSources } from './overlap.js';
import type { BookEntry, ScheduleBook } from './schedule-book.js';
import type { ScheduleFollower } from './schedule-follower.js';
import { scheduleRecord, type SkipReason, type TriggerRecord } from './schedule-records.js';

/** A tenant an occurrence fires for, or undefined for a schedule without tenants. */
export type FireTarget = string | undefined;

export interface FireStepDeps {
  config: CompiledConfig;
  firer: OccurrenceFirer;
  follower: ScheduleFollower;
  overlap: OverlapSources;
  events: EventPublisher;
  log: Logger;
  now?: () => number;
  book(): ScheduleBook;
  ctx: PlanContext;
  /** The tenants per-tenant schedules fire for now (configured, or provisioned on the broker). */
  tenants(): readonly string[];
  isMember(tenant: string): boolean;
  /** Whether the leader's connection is still open: a failure without it ends the term. */
  leading(): boolean;
}

/**
 * What the leader does with one due occurrence of one schedule for one tenant: check it is still
 * wanted and not handled yet, apply the overlap policy (OJS cron 6), enqueue the job with its
 * `fired` record (OccurrenceFirer), publish `cron.triggered` or `cron.skipped`, and plan the next.
 *
 * It remembers what it handled itself until the stream says so too: the book lags behind this
 * leader's own commits by a round trip, and a plan made meanwhile must not fire them again.
 */
export class FireStep {
  private readonly here = new Map<string, Map<string, { occurrence: number; job?: string }>>();
  private readonly firing = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly deps: FireStepDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** Forgets what it handled of a schedule (all schedules without `key`): removed, or registered anew. */
  forget(key?: string): void {
    if (key === undefined) this.here.clear();
    else this.here.delete(key);
  }

  /** The last occurrence handled for (entry, tenant): by the stream or by this leader. */
  handled(entry: BookEntry, tenant: FireTarget): number | undefined {
    const mine = this.here.get(entry.key)?.get(tenant ?? '')?.occurrence;
    const known = entry.handled.get(tenant ?? '');
    return mine === undefined ? known : known === undefined ? mine : Math.max(mine, known);
  }

  targetsOf(entry: BookEntry): FireTarget[] {
    const { owner, tenants } = entry.schedule;
    if (owner !== undefined) return [owner];
    if (tenants === undefined) return [undefined];
    if (tenants === '*') return [...this.deps.tenants()];
    return tenants.filter((tenant) => this.deps.isMember(tenant));
  }

  private targets(entry: BookEntry, tenant: FireTarget): boolean {
    const { owner, tenants } = entry.schedule;
    if (owner !== undefined) return tenant === owner;
    if (tenants === undefined) return tenant === undefined;
    if (tenant === undefined || !this.deps.isMember(tenant)) return false;
    return tenants === '*' || tenants.includes(tenant);
  }

  /** A due occurrence: fired, skipped or dropped (stale plan); @returns the next one to plan. */
  async occurrence(pending: Pending): Promise<Pending | undefined> {
    const entry = this.deps.book().entries.get(pending.key);
    if (entry === undefined || versionOf(entry) !== pending.version) return undefined;
    const { tenant, occurrence } = pending;
    if (!entry.enabled) {
      this.skippedEvent(entry, tenant, occurrence, 'disabled');
      return this.after(entry, tenant, occurrence);
    }
    if (!this.targets(entry, tenant)) return undefined;
    if ((this.handled(entry, tenant) ?? -Infinity) < occurrence) await this.fire(entry, tenant, occurrence);
    return this.after(entry, tenant, occurrence);
  }

  /** The triggers not fired yet (`cron trigger`), each a fire now, for its tenant or every target of its schedule. */
  triggers(): Array<() => Promise<undefined>> {
    const work: Array<() => Promise<undefined>> = [];
    for (const trigger of this.deps.book().triggers) {
      if (this.firing.has(trigger.id)) continue;
      this.firing.add(trigger.id);
      const entry = this.deps.book().entries.get(trigger.key);
      if (entry === undefined) continue;
      const targets = trigger.tenant === undefined ? this.targetsOf(entry) : [trigger.tenant];
      for (const tenant of targets) {
        work.push(async () => {
          await this.fire(entry, tenant, Date.parse(trigger.at), trigger);
          return undefined;
        });
      }
    }
    return work;
  }

  private after(entry: BookEntry, tenant: FireTarget, occurrence: number): Pending | undefined {
    const gaps: number[] = [];
    const next = planAfter(entry, tenant, occurrence, this.now(), this.deps.ctx, gaps);
    // A wall time the spring-forward skipped (OJS cron 5.2): reported once per schedule, not per tenant.
    for (const gap of tenant === undefined || tenant === this.targetsOf(entry)[0] ? gaps : []) {
      this.skippedEvent(entry, tenant, gap, 'dst_skip');
    }
    return next;
  }

  private async fire(entry: BookEntry, tenant: FireTarget, occurrence: number, trigger?: TriggerRecord): Promise<void> {
    const { schedule, key } = entry;
    const id = occurrenceId(key, entry.created_at, tenant, occurrence, trigger?.id ?? '');
    if (trigger === undefined) {
      const verdict = await overlapVerdict(schedule.overlap_policy, schedule.batch, this.lastJob(entry, tenant), this.deps.overlap);
      if (verdict.kind === 'skip') return this.skip(entry, tenant, occurrence, 'overlap_skip', verdict.job);
      if (verdict.kind === 'cancel') await this.cancel(verdict.job, verdict.batch);
      if (verdict.kind === 'enqueue' && verdict.waiting) {
        this.deps.log.warn('schedule: the previous occurrence has not started yet; this one waits behind it', {
          schedule: key,
          tenant,
          job: verdict.job,
        });
      }
    }
    const record = scheduleRecord({
      kind: 'fired',
      key,
      ...(tenant === undefined ? {} : { tenant }),
      occurrence: new Date(occurrence).toISOString(),
      job: id,
      ...(trigger === undefined ? {} : { trigger: trigger.id }),
    });
    let outcome;
    try {
      outcome = await this.deps.firer.fire(occurrenceJob(entry, tenant, occurrence, id), record);
    } catch (err) {
      if (!this.deps.leading()) throw err;
      this.deps.log.error('schedule: occurrence not enqueued', {
        schedule: key,
        tenant,
        occurrence: record.occurrence,
        err: (err as Error).message,
      });
      return this.skip(entry, tenant, occurrence, 'refused');
    }
    if (trigger === undefined) this.remember(entry, tenant, occurrence, outcome === 'fired' ? id : undefined);
    if (outcome === 'refused') {
      this.deps.log.error("schedule: a full queue refused the occurrence's job (queue.full)", {
        schedule: key,
        tenant,
        queue: schedule.queue,
      });
      return this.skip(entry, tenant, occurrence, 'queue_full', undefined, false);
    }
    void this.deps.events.publish('cron.triggered', schedule.name, {
      cron_name: schedule.name,
      cron_expression: schedule.cron,
      timezone: schedule.timezone,
      job_id: id,
      job_type: schedule.type,
      run_count: entry.run_count + 1,
      scheduled_time: record.occurrence,
      actual_time: new Date().toISOString(),
      ...(tenant === undefined ? {} : { tenant }),
      ...(trigger === undefined ? {} : { manual: true }),
    });
  }

  private async skip(
    entry: BookEntry,
    tenant: FireTarget,
    occurrence: number,
    reason: SkipReason,
    job?: string,
    record = true,
  ): Promise<void> {
    this.remember(entry, tenant, occurrence, undefined);
    if (record) {
      await this.deps.follower.append(
        scheduleRecord({
          kind: 'skipped',
          key: entry.key,
          ...(tenant === undefined ? {} : { tenant }),
          occurrence: new Date(occurrence).toISOString(),
          reason,
          ...(job === undefined ? {} : { job }),
        }),
      );
    }
    this.skippedEvent(entry, tenant, occurrence, reason, job);
  }

  private skippedEvent(entry: BookEntry, tenant: FireTarget, at: number, reason: SkipReason, job?: string): void {
    const { schedule } = entry;
    void this.deps.events.publish('cron.skipped', schedule.name, {
      cron_name: schedule.name,
      cron_expression: schedule.cron,
      timezone: schedule.timezone,
      reason,
      ...(job === undefined ? {} : { active_job_id: job }),
      // A dst_skip's time is a wall-clock time that does not exist: written without a zone.
      scheduled_time: reason === 'dst_skip' ? new Date(at).toISOString().slice(0, 19) : new Date(at).toISOString(),
      ...(tenant === undefined ? {} : { tenant }),
    });
  }

  private remember(entry: BookEntry, tenant: FireTarget, occurrence: number, job: string | undefined): void {
    let tenants = this.here.get(entry.key);
    if (tenants === undefined) this.here.set(entry.key, (tenants = new Map()));
    const previous = tenants.get(tenant ?? '');
    tenants.set(tenant ?? '', {
      occurrence,
      ...(job === undefined ? (previous?.job === undefined ? {} : { job: previous.job }) : { job }),
    });
  }

  private lastJob(entry: BookEntry, tenant: FireTarget): string | undefined {
    return this.here.get(entry.key)?.get(tenant ?? '')?.job ?? entry.lastJobs.get(tenant ?? '');
  }

  /** `cancel_previous`: the previous job (or its batch) is cancelled; one that runs on meanwhile is not interrupted. */
  private async cancel(job: string, batch: string | undefined): Promise<void> {
    try {
      if (batch !== undefined) await cancelBatch(this.deps.config, batch, this.deps.log);
      else await cancelJob(this.deps.config, job, this.deps.log, await this.deps.overlap.jobs());
    } catch (err) {
      this.deps.log.info('schedule: the previous occurrence was not cancelled', { job, batch, err: (err as Error).message });
    }
  }
}
