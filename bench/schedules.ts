/**
 * `--only schedules`: what one schedule over many tenants (`--schedule-tenants`, 10,000 by
 * default) costs its leader. In one process, against the broker: the baseline publishes one job
 * per tenant with a `Publisher` (confirms, 64 at once); then a scheduler leads and fires one
 * occurrence of a per-tenant schedule without `spread` (every tenant due at once: the time from
 * the occurrence to the last tenant's `fired` record, and the leader's CPU), then one with
 * `spread: PT60S` (each tenant at its own offset: how late each fired after its offset, and the
 * CPU over the window). Also the time to plan the schedule for every tenant. Overlap `allow`: no
 * job store is read, the cost measured is the firing's.
 */
import { compileSchedule } from '../src/config/compile-schedule.js';
import { queueFor } from '../src/config/queue-resolver.js';
import { Publisher } from '../src/index.js';
import { declareTopologyOnce } from '../src/broker/declare-topology.js';
import { coreTopology, mergeTopologies, provisionedQueueTopology } from '../src/topology/build-topology.js';
import { planOccurrence, spreadOffset } from '../src/schedule/fire-plan.js';
import type { ScheduleBook } from '../src/schedule/schedule-book.js';
import { scheduleRecord, type ScheduleRecord } from '../src/schedule/schedule-records.js';
import { Scheduler } from '../src/schedule/scheduler.js';
import { cpuNow, fmt, progress, purgeQueues, sleep, type BenchContext } from './common.js';
import { dropSubConfig, subConfig } from './sub-prefix.js';

export interface SchedulesResult {
  tenants: number;
  /** One job per tenant through a Publisher, 64 confirms outstanding. */
  baselineSeconds: number;
  /** No spread: from the occurrence to the last tenant's fired record. */
  fireSeconds: number;
  /** This process's CPU (the leader, and its reader of the stream) over that, ms. */
  fireCpuMs: number;
  spreadSeconds: number;
  /** With spread: from the occurrence to the last tenant's fired record. */
  spreadFireSeconds: number;
  spreadCpuMs: number;
  /** With spread: how long after its offset each tenant's job was fired, ms. */
  latenessP50Ms: number;
  latenessP99Ms: number;
  latenessMaxMs: number;
  /** Planning the schedule's next occurrence for every tenant (what a registration or a new leader costs), ms. */
  planMs: number;
}

const SPREAD_MS = 60_000;

/** A 6-field expression firing once, at `at` (whole seconds, UTC). */
function onceAt(at: number): string {
  const d = new Date(at);
  return `${d.getUTCSeconds()} ${d.getUTCMinutes()} ${d.getUTCHours()} ${d.getUTCDate()} ${d.getUTCMonth() + 1} *`;
}

export async function benchSchedules(ctx: BenchContext, count: number): Promise<SchedulesResult> {
  const tenants = Array.from({ length: count }, (_, i) => `t${String(i).padStart(5, '0')}`);
  const sub = subConfig(ctx, 'sched', { tenants, queues: { ticks: { scope: 'shared' } }, stages: {} });
  const { config } = sub;
  const queue = sub.names.queue('ticks');
  try {
    await declareTopologyOnce(
      config,
      mergeTopologies(coreTopology(config), provisionedQueueTopology(config, queueFor(config, 'ticks'))),
      ctx.log,
    );
    progress(`schedules: baseline, ${fmt(count)} jobs through a Publisher`);
    const publisher = await Publisher.connect(config, { log: ctx.log });
    let started = performance.now();
    for (let i = 0; i < count; i += 64) {
      await Promise.all(tenants.slice(i, i + 64).map((tenant) => publisher.publish('ticks', { type: 'tick.tock', args: [], tenant })));
    }
    const baselineSeconds = (performance.now() - started) / 1000;
    await publisher.close();
    await purgeQueues(ctx.opts.url, [queue]);

    const scheduler = new Scheduler(config, { log: ctx.log, retryMs: 500, overlap: { jobs: () => Promise.reject(new Error('not read')) } });
    scheduler.start();
    const fired = new Map<string, number>();
    const follow = (book: ScheduleBook): void => {
      book.onChange((_change, record: ScheduleRecord) => {
        if (record.kind === 'fired' && record.tenant !== undefined) fired.set(`${record.key}|${record.tenant}`, Date.parse(record.at));
      });
    };
    scheduler.schedules.onBook(follow);
    follow(await scheduler.schedules.book());
    for (let waited = 0; !scheduler.isLeader && waited < 30_000; waited += 100) await sleep(100);

    const run = async (name: string, spread: string | undefined): Promise<{ seconds: number; cpuMs: number; occurrence: number }> => {
      const occurrence = Math.ceil(Date.now() / 1000) * 1000 + 8000;
      const schedule = compileSchedule(
        name,
        {
          cron: onceAt(occurrence),
          queue: 'ticks',
          type: 'tick.tock',
          tenants: '*',
          overlap_policy: 'allow',
          ...(spread === undefined ? {} : { spread }),
        },
        name,
      );
      await scheduler.schedules.append(scheduleRecord({ kind: 'put', schedule, origin: 'api' }));
      await sleep(occurrence - Date.now() - 500);
      const cpu = cpuNow();
      const deadline = Date.now() + 60_000 + SPREAD_MS * 2;
      const done = (): number => tenants.filter((tenant) => fired.has(`${name}|${tenant}`)).length;
      while (done() < count && Date.now() < deadline) await sleep(200);
      if (done() < count) throw new Error(`schedules: ${name} fired for ${done()} of ${count} tenants`);
      const last = Math.max(...tenants.map((tenant) => fired.get(`${name}|${tenant}`) as number));
      const result = { seconds: (last - occurrence) / 1000, cpuMs: (cpuNow() - cpu) / 1000, occurrence };
      await scheduler.schedules.append(scheduleRecord({ kind: 'remove', key: name }));
      await purgeQueues(ctx.opts.url, [queue]);
      return result;
    };
    progress(`schedules: one occurrence for ${fmt(count)} tenants, no spread`);
    const burst = await run('burst', undefined);
    progress(`schedules: one occurrence for ${fmt(count)} tenants, spread over ${SPREAD_MS / 1000} s`);
    const spread = await run('spread', `PT${SPREAD_MS / 1000}S`);
    const lateness = tenants
      .map((tenant) => (fired.get(`spread|${tenant}`) as number) - (spread.occurrence + spreadOffset('spread', tenant, SPREAD_MS)))
      .sort((a, b) => a - b);
    const at = (q: number): number => lateness[Math.min(lateness.length - 1, Math.floor(q * lateness.length))] as number;

    // Planning alone: what a registration, a new leader or a tenant change costs the leader.
    const book = await scheduler.schedules.book();
    const entry = {
      key: 'plan',
      schedule: compileSchedule('plan', { cron: '0 2 * * *', type: 'tick.tock', queue: 'ticks', tenants: '*', spread: 'PT30M' }, 'plan'),
      origin: 'api' as const,
      created_at: new Date().toISOString(),
      updated_at: new Date().toISOString(),
      enabled: true,
      enabledAt: Date.now(),
      run_count: 0,
      handled: new Map<string, number>(),
      lastJobs: new Map<string, string>(),
      recent: [],
    };
    const planCtx = { zoneOf: () => 'Europe/Copenhagen', joinedAt: (t: string) => book.joined.get(t), handled: () => undefined };
    started = performance.now();
    for (const tenant of tenants) planOccurrence(entry, tenant, Date.now(), planCtx);
    const planMs = performance.now() - started;
    await scheduler.stop();
    return {
      tenants: count,
      baselineSeconds,
      fireSeconds: burst.seconds,
      fireCpuMs: burst.cpuMs,
      spreadSeconds: SPREAD_MS / 1000,
      spreadFireSeconds: spread.seconds,
      spreadCpuMs: spread.cpuMs,
      latenessP50Ms: at(0.5),
      latenessP99Ms: at(0.99),
      latenessMaxMs: lateness.at(-1) as number,
      planMs,
    };
  } finally {
    await dropSubConfig(ctx, sub);
  }
}
