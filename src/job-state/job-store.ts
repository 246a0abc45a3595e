import type { ForeignRecords } from './foreign-records.js';
import type { JobRecord, JobRow, JobState } from './job-lifecycle.js';

/**
 * Where the tracker folds job states (docs/job-state.md): one small interface, as the payload
 * store has. Stagecoach ships an in-memory store (the embedded default: every reader replays the
 * tracking stream into its own) and a PostgreSQL store (a `jobs` table several trackers may write
 * at once, read directly by `job status|list` and the admin API).
 *
 * Every write goes through foldJob (job-lifecycle.ts), which is commutative and idempotent: a
 * record applied twice, or by two trackers in any order, leaves the same rows.
 */
export interface JobStore {
  /**
   * The records refused as another tenant's than the job's they name (foreign-records.ts): a
   * job's tenant is fixed by its first record naming one.
   */
  readonly foreign: ForeignRecords;
  /** Folds a batch of records (in stream order, though the result does not depend on it). */
  apply(records: readonly JobRecord[]): Promise<void>;
  /** One job, or undefined when no record named it (or it was pruned). */
  get(id: string): Promise<JobRow | undefined>;
  /** Jobs matching `filter`, by id (UUIDv7: creation order), `limit` at a time from after `cursor`. */
  list(filter: JobFilter, page: JobPage): Promise<JobList>;
  /** Drops the jobs whose retention ran out before `now`. @returns how many. */
  prune(now: Date): Promise<number>;
  /** Drops every job, leaving no tombstone (`stagecoach admin --test-reset` only). @returns how many. */
  clear(): Promise<number>;
  close(): Promise<void>;
}

export interface JobFilter {
  tenant?: string;
  queue?: string;
  /** The stored state (a scheduled job that came due is still `scheduled` here; see shownState). */
  state?: JobState;
  type?: string;
  /** Jobs carrying this tag. */
  tag?: string;
  /** ISO 8601: created at or after. */
  since?: string;
}

export interface JobPage {
  /** At most this many (1..1000). */
  limit: number;
  /** The last id of the previous page. */
  cursor?: string;
}

export interface JobList {
  jobs: JobRow[];
  /** The cursor of the next page; absent on the last one. */
  next_cursor?: string;
}

/** Whether a row passes a filter (the memory store's; PostgreSQL's is its WHERE clause). */
export function matches(row: JobRow, filter: JobFilter): boolean {
  return (
    (filter.tenant === undefined || row.tenant === filter.tenant) &&
    (filter.queue === undefined || row.queue === filter.queue) &&
    (filter.state === undefined || row.state === filter.state) &&
    (filter.type === undefined || row.type === filter.type) &&
    (filter.tag === undefined || (row.tags?.includes(filter.tag) ?? false)) &&
    (filter.since === undefined || (row.created_at !== undefined && row.created_at >= filter.since))
  );
}
