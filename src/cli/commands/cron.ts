import { checkScheduleTarget, compileSchedule } from '../../config/compile-schedule.js';
import type { CompiledConfig, ScheduleConfig } from '../../config/config.types.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { validateRetryPolicy } from '../../retry/retry-policy.js';
import type { BookEntry, ScheduleBook } from '../../schedule/schedule-book.js';
import { ScheduleFollower } from '../../schedule/schedule-follower.js';
import { scheduleRecord, type ScheduleRecord } from '../../schedule/schedule-records.js';
import { listedEntries, scheduleView, type ScheduleView } from '../../schedule/schedule-views.js';
import { leaderAlive } from '../../schedule/leader-probe.js';
import { EXIT_OK } from '../exit-codes.js';

/** Options of `cron add`: the schedule's fields (docs/schedules.md). */
export interface CronAddOptions {
  cron: string;
  type: string;
  queue?: string;
  args?: string;
  meta?: string;
  timezone?: string;
  tenants?: string;
  spread?: string;
  overlap?: string;
  batch?: boolean;
  disabled?: boolean;
  description?: string;
  priority?: string;
  timeout?: string;
  retry?: string;
  config?: string;
}

/** Runs `work` with the schedules read up to date on a connection of this command's own. */
async function withBook<T>(
  configPath: string | undefined,
  work: (config: CompiledConfig, follower: ScheduleFollower, book: ScheduleBook) => Promise<T>,
): Promise<T> {
  const config = await loadConfig(configPath);
  const follower = new ScheduleFollower(config, createLogger({ command: 'cron' }));
  try {
    return await work(config, follower, await follower.book());
  } finally {
    await follower.close();
  }
}

/** `stagecoach cron list [--json]`: every schedule, its next and last run and run count, and who leads. */
export async function cronList(opts: { json?: boolean; config?: string }): Promise<number> {
  return withBook(opts.config, async (config, _follower, book) => {
    const views = listedEntries(book, config).map((entry) => scheduleView(entry, config));
    const leader = await leaderAlive(config);
    if (opts.json) {
      process.stdout.write(`${JSON.stringify({ crons: views, count: views.length, leader: leader ? (book.leader ?? null) : null })}\n`);
      return EXIT_OK;
    }
    for (const view of views) process.stdout.write(`${line(view)}\n`);
    process.stdout.write(`${views.length} schedule${views.length === 1 ? '' : 's'}; `);
    process.stdout.write(
      leader
        ? `leader: ${book.leader?.process ?? 'a scheduler'}${book.leader === undefined ? '' : ` since ${book.leader.at}`}\n`
        : 'no scheduler is leading: nothing fires until `stagecoach scheduler` (or `admin`, `dev`) runs\n',
    );
    return EXIT_OK;
  });
}

function line(view: ScheduleView): string {
  const who =
    view.tenant !== undefined
      ? `tenant ${view.tenant}`
      : view.tenants === undefined
        ? '-'
        : view.tenants === '*'
          ? 'every tenant'
          : view.tenants.join(',');
  return [
    `${view.tenant === undefined ? '' : `${view.tenant}/`}${view.name}`,
    `"${view.expression}" ${view.timezone}`,
    `${view.type} -> ${String(view.options.queue)}`,
    who,
    view.enabled ? 'enabled' : 'disabled',
    `next ${view.next_run_at ?? '-'}`,
    `last ${view.last_run_at ?? '-'}`,
    `${view.run_count} run${view.run_count === 1 ? '' : 's'}`,
  ].join('\t');
}

/** `stagecoach cron add <name> --cron EXPR --type T [...]`: registers (or replaces) a schedule, as `POST /ojs/v1/cron` does. */
export async function cronAdd(name: string, opts: CronAddOptions): Promise<number> {
  const raw: ScheduleConfig = {
    cron: opts.cron,
    type: opts.type,
    ...(opts.queue === undefined ? {} : { queue: opts.queue }),
    ...(opts.args === undefined ? {} : { args: json(opts.args, '--args') as unknown[] }),
    ...(opts.meta === undefined ? {} : { meta: json(opts.meta, '--meta') as Record<string, unknown> }),
    ...(opts.timezone === undefined ? {} : { timezone: opts.timezone }),
    ...(opts.tenants === undefined ? {} : { tenants: opts.tenants === '*' ? '*' : opts.tenants.split(',').map((t) => t.trim()) }),
    ...(opts.spread === undefined ? {} : { spread: opts.spread }),
    ...(opts.overlap === undefined ? {} : { overlap_policy: opts.overlap as ScheduleConfig['overlap_policy'] }),
    ...(opts.batch === true ? { batch: true } : {}),
    ...(opts.disabled === true ? { enabled: false } : {}),
    ...(opts.description === undefined ? {} : { description: opts.description }),
    ...(opts.priority === undefined ? {} : { priority: Number(opts.priority) }),
    ...(opts.timeout === undefined ? {} : { timeout: Number(opts.timeout) }),
    ...(opts.retry === undefined ? {} : { retry: json(opts.retry, '--retry') as ScheduleConfig['retry'] }),
  };
  const schedule = compileSchedule(name, raw, name);
  validateRetryPolicy(schedule.retry, `${name}.retry`);
  return withBook(opts.config, async (config, follower, book) => {
    checkScheduleTarget(config, schedule, name);
    if (config.schedules.has(name))
      throw new StagecoachError('CONFLICT', `schedule "${name}" is defined in ${config.source}: change it there`);
    const existed = book.entries.has(name);
    const after = await follower.append(scheduleRecord({ kind: 'put', schedule, origin: 'api' }));
    const view = scheduleView(after.entries.get(name) as BookEntry, config);
    process.stdout.write(`${existed ? 'updated' : 'added'} ${name}: next run ${view.next_run_at ?? '-'}\n`);
    return EXIT_OK;
  });
}

/** `stagecoach cron remove|enable|disable <name>` (a tenant's schedule as `<tenant>/<name>`). */
export async function cronChange(action: 'remove' | 'enable' | 'disable', key: string, opts: { config?: string }): Promise<number> {
  return withBook(opts.config, async (config, follower, book) => {
    if (action === 'remove' && config.schedules.has(key)) {
      throw new StagecoachError('CONFLICT', `schedule "${key}" is defined in ${config.source}: remove it there`);
    }
    const entry = entryOf(book, key);
    if (action === 'remove' && entry.origin === 'config') {
      throw new StagecoachError('CONFLICT', `schedule "${key}" is defined in ${config.source}: remove it there`);
    }
    const record: ScheduleRecord =
      action === 'remove' ? scheduleRecord({ kind: 'remove', key }) : scheduleRecord({ kind: 'toggle', key, enabled: action === 'enable' });
    await follower.append(record);
    process.stdout.write(`${action === 'remove' ? 'removed' : `${action}d`} ${key}\n`);
    return EXIT_OK;
  });
}

/** `stagecoach cron trigger <name> [--tenant T]`: the leader fires one occurrence now (for T, or every tenant of the schedule). */
export async function cronTrigger(key: string, opts: { tenant?: string; config?: string }): Promise<number> {
  return withBook(opts.config, async (config, follower, book) => {
    const entry = entryOf(book, key);
    const tenant = entry.schedule.owner ?? opts.tenant;
    const record = scheduleRecord({ kind: 'trigger', key, ...(tenant === undefined ? {} : { tenant }) });
    await follower.append(record);
    const leading = await leaderAlive(config);
    process.stdout.write(
      `trigger ${record.id} of ${key}${tenant === undefined ? '' : ` for ${tenant}`} written: ${leading ? 'the leader fires it' : 'no scheduler is leading: it fires when one starts'}\n`,
    );
    return EXIT_OK;
  });
}

function entryOf(book: ScheduleBook, key: string): BookEntry {
  const entry = book.entries.get(key);
  if (entry === undefined)
    throw new StagecoachError('NOT_FOUND', `no schedule "${key}" (\`stagecoach cron list\` shows them; a tenant's is <tenant>/<name>)`);
  return entry;
}

function json(text: string, option: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new StagecoachError('INVALID_REQUEST', `${option} must be JSON, got ${text}`);
  }
}
