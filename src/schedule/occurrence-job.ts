import { createJob } from '../job/envelope.js';
import type { Job } from '../job/job.types.js';
import { occurrenceBatch } from './occurrence-id.js';
import type { BookEntry } from './schedule-book.js';

/**
 * The job of one occurrence (for one tenant): the schedule's type, arguments and options, its id
 * derived (occurrence-id.ts), and the meta OJS cron 6.3 asks for, `cron_name` and
 * `cron_triggered_at` (the occurrence's time). With `batch: true` it starts the occurrence's batch.
 */
export function occurrenceJob(entry: BookEntry, tenant: string | undefined, occurrence: number, id: string): Job {
  const schedule = entry.schedule;
  const job = createJob(
    {
      type: schedule.type,
      args: schedule.args,
      meta: { ...schedule.meta, cron_name: schedule.name, cron_triggered_at: new Date(occurrence).toISOString() },
      ...(schedule.priority === undefined ? {} : { priority: schedule.priority }),
      ...(schedule.timeout === undefined ? {} : { timeout: schedule.timeout }),
      ...(schedule.retry === undefined ? {} : { retry: schedule.retry }),
    },
    { queue: schedule.queue, ...(tenant === undefined ? {} : { tenant }), ...(schedule.batch ? { batch: occurrenceBatch(id) } : {}) },
  );
  job.id = id;
  return job;
}
