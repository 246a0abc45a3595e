import type { CompiledConfig, ScheduleDefinition } from '../config/config.types.js';
import type { ScheduleBook } from './schedule-book.js';
import { scheduleRecord, type ScheduleRecord } from './schedule-records.js';

/**
 * The records that bring the book in line with the configuration file's `schedules` (the leader
 * writes them when it starts and when the file changes): a `put` for each schedule new or changed
 * there, a `remove` for each the file registered and no longer names. A schedule registered
 * through the API under a name the file now uses is taken over by the file. `enabled` toggled by
 * `cron enable|disable` stays as toggled until the file's definition changes.
 */
export function configSyncRecords(config: CompiledConfig, book: ScheduleBook): ScheduleRecord[] {
  const records: ScheduleRecord[] = [];
  for (const schedule of config.schedules.values()) {
    const entry = book.entries.get(schedule.name);
    if (entry !== undefined && entry.origin === 'config' && sameDefinition(entry.schedule, schedule)) continue;
    records.push(scheduleRecord({ kind: 'put', schedule, origin: 'config' }));
  }
  for (const entry of book.entries.values()) {
    if (entry.origin === 'config' && !config.schedules.has(entry.key)) records.push(scheduleRecord({ kind: 'remove', key: entry.key }));
  }
  return records;
}

function sameDefinition(a: ScheduleDefinition, b: ScheduleDefinition): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
