import type { AmqpConnection } from '../broker/amqp-connection.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { EventPublisher } from '../events/event-publisher.js';
import type { Logger } from '../logging/logger.js';
import { coreTopology } from '../topology/build-topology.js';
import { configSyncRecords } from './config-sync.js';
import { FireStep, type FireTarget } from './fire-step.js';
import { PendingHeap, planOccurrence, type Pending, type PlanContext } from './fire-plan.js';
import { OccurrenceFirer } from './occurrence-firer.js';
import type { OverlapSources } from './overlap.js';
import type { BookEntry, ScheduleBook } from './schedule-book.js';
import type { ScheduleFollower } from './schedule-follower.js';
import { scheduleKey, scheduleRecord } from './schedule-records.js';
import { SchedulerTenants } from './scheduler-tenants.js';

/** The longest the leader sleeps: a registration wakes it sooner, this bounds a missed wake (OJS cron 7.3: 60 s). */
const MAX_SLEEP_MS = 60_000;
/** The shortest time between two evaluations (OJS cron 7.3: at most once a second). */
const MIN_PASS_MS = 1000;
/** Occurrences fired at once in a pass. */
const FIRES_AT_ONCE = 128;
/** Records after which the leader writes a snapshot (far fewer than the stream keeps). */
export const SNAPSHOT_EVERY = 10_000;

/** What a scheduler's leader works with. */
export interface SchedulerDeps {
  /** The configuration as it is now (the file may change under `stagecoach admin`). */
  config(): Promise<CompiledConfig>;
  follower: ScheduleFollower;
  overlap: OverlapSources;
  events: EventPublisher;
  log: Logger;
  /** Who this process is, for the `leader` record (host and pid). */
  process: string;
  now?: () => number;
}

/**
 * One leadership term (Leadership's LeaderTerm): brings the configuration's schedules into the
 * stream, plans every schedule's next occurrence per tenant, and fires each when due
 * (fire-step.ts), until the leadership is lost or the scheduler stops. Every decision is made
 * from the schedules stream read up to a mark written after the leadership was taken, so a
 * former leader's last fires are known before the first one of this term.
 */
export class SchedulerTerm {
  private readonly heap = new PendingHeap();
  private book!: ScheduleBook;
  private tenants!: SchedulerTenants;
  private step!: FireStep;
  private wake: (() => void) | undefined;
  private lastPass = 0;
  private readonly now: () => number;

  constructor(
    private readonly deps: SchedulerDeps,
    private readonly connection: AmqpConnection,
  ) {
    this.now = deps.now ?? Date.now;
  }

  async run(lost: Promise<void>): Promise<void> {
    const { deps } = this;
    let ended = false;
    void lost.then(() => {
      ended = true;
      this.wake?.();
    });
    const config = await deps.config();
    if (!config.security.tenantUsers) await declareTopology(this.connection, coreTopology(config), deps.log);
    const firer = new OccurrenceFirer(config, this.connection);
    this.book = await deps.follower.append(scheduleRecord({ kind: 'leader', process: deps.process }));
    for (const record of configSyncRecords(config, this.book)) this.book = await deps.follower.append(record);
    this.tenants = await SchedulerTenants.start(config, this.connection, deps.log, {
      joined: async (tenant) => {
        await deps.follower.append(scheduleRecord({ kind: 'joined', tenant }));
        this.planTenant(tenant);
      },
      left: async (tenant) => {
        await deps.follower.append(scheduleRecord({ kind: 'left', tenant }));
      },
    });
    this.step = new FireStep({
      ...deps,
      config,
      firer,
      book: () => this.book,
      ctx: this.ctx,
      tenants: () => this.tenants.tenants,
      isMember: (tenant) => this.tenants.has(tenant),
      leading: () => !ended,
    });
    const unsubscribe = [this.watch(this.book), deps.follower.onBook((book) => this.watch(book))];
    try {
      this.planAll();
      deps.log.info('scheduler: leading', {
        schedules: this.book.entries.size,
        tenants: this.tenants.tenants.length,
        planned: this.heap.size,
      });
      while (!ended) {
        await this.sleep(lost);
        if (ended) break;
        await this.pass();
        if (this.book.sinceSnapshot >= SNAPSHOT_EVERY)
          this.book = await deps.follower.append(
            scheduleRecord({
              kind: 'snapshot',
              state: this.book.snapshot(),
              ...(this.book.lastId === undefined ? {} : { covers: this.book.lastId }),
            }),
          );
      }
    } finally {
      for (const off of unsubscribe) off();
      await this.tenants.close();
      await firer.close();
    }
  }

  /** Follows a book: a changed schedule is planned again, a trigger wakes the loop; a new book (reconnection) is planned whole. */
  private watch(book: ScheduleBook): () => void {
    if (book !== this.book) {
      this.book = book;
      this.planAll();
    }
    return book.onChange((change, record) => {
      if (book !== this.book) return;
      if (change === 'schedules') {
        if (record.kind === 'put') {
          const entry = book.entries.get(scheduleKey(record.schedule));
          // Registered anew (not an update): nothing this leader fired of an older one is its.
          if (entry?.created_at === record.at) this.step.forget(entry.key);
          this.planEntry(entry);
        } else if (record.kind === 'toggle') this.planEntry(book.entries.get(record.key));
        else if (record.kind === 'remove') this.step.forget(record.key);
        else if (record.kind === 'clear') {
          this.step.forget();
          this.planAll();
        } else if (record.kind === 'snapshot') this.planAll();
      }
      if (change === 'schedules' || change === 'trigger') this.wake?.();
    });
  }

  private readonly ctx: PlanContext = {
    zoneOf: (tenant, schedule) => (tenant === undefined ? undefined : this.tenants.zoneOf(tenant)) ?? schedule.timezone,
    joinedAt: (tenant) => this.book.joined.get(tenant),
    handled: (entry, tenant) => this.step.handled(entry, tenant),
  };

  private planAll(): void {
    this.heap.clear();
    for (const entry of this.book.entries.values()) this.planEntry(entry);
    this.wake?.();
  }

  /** Plans the next occurrence of an entry for each of its tenants (a disabled one: once, for its `cron.skipped`). */
  private planEntry(entry: BookEntry | undefined): void {
    if (entry === undefined) return;
    const now = this.now();
    const targets: FireTarget[] = entry.enabled ? this.step.targetsOf(entry) : [undefined];
    for (const tenant of targets) this.push(planOccurrence(entry, tenant, now, this.ctx));
  }

  /** A tenant that joined: its next occurrence of every per-tenant schedule it belongs to. */
  private planTenant(tenant: string): void {
    const now = this.now();
    for (const entry of this.book.entries.values()) {
      if (entry.enabled && this.step.targetsOf(entry).includes(tenant)) this.push(planOccurrence(entry, tenant, now, this.ctx));
    }
  }

  private push(pending: Pending | undefined): void {
    if (pending !== undefined) this.heap.push(pending);
  }

  /** Until the first pending is due (at least a second after the last pass), a change wakes it, or the term ends. */
  private async sleep(lost: Promise<void>): Promise<void> {
    const now = this.now();
    const due = this.heap.peek()?.due ?? now + MAX_SLEEP_MS;
    const hasTriggers = this.book.triggers.length > 0;
    const wait = Math.max(hasTriggers ? 0 : due - now, this.lastPass + MIN_PASS_MS - now, 0);
    if (wait <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      lost,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.min(wait, MAX_SLEEP_MS));
        this.wake = resolve;
      }),
    ]);
    clearTimeout(timer);
    this.wake = undefined;
    // Woken by a change: wait out the rest of the second since the last pass.
    const left = this.lastPass + MIN_PASS_MS - this.now();
    if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
  }

  /** Fires every occurrence due now and every trigger, FIRES_AT_ONCE at a time, planning each one's next. */
  private async pass(): Promise<void> {
    this.deps.log.debug('scheduler: pass', { planned: this.heap.size });
    this.lastPass = this.now();
    const due: Pending[] = [];
    for (let top = this.heap.peek(); top !== undefined && top.due <= this.lastPass; top = this.heap.peek())
      due.push(this.heap.pop() as Pending);
    const work: Array<() => Promise<Pending | undefined>> = [
      ...due.map((pending) => () => this.step.occurrence(pending)),
      ...this.step.triggers(),
    ];
    for (let index = 0; index < work.length; index += FIRES_AT_ONCE) {
      const nexts = await Promise.all(work.slice(index, index + FIRES_AT_ONCE).map((run) => run()));
      for (const next of nexts) this.push(next);
    }
  }
}
