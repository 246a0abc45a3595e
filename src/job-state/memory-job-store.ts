import { childRecords, foldJob, isForeignRecord, type JobRecord, type JobRow, type RetentionOf } from './job-lifecycle.js';
import { matches, type JobFilter, type JobList, type JobPage, type JobStore } from './job-store.js';
import { ForeignRecords } from './foreign-records.js';

/** A uniqueness key's claim (see MemoryUniqueClaims). */
export interface MemoryKey {
  job: string;
  /** Date.now() at the claim. */
  claimedAt: number;
}

/**
 * The embedded job store (`tracking.store: { kind: "memory" }`): rows in a Map, lost with the
 * process; every reader (the tracker, the admin API's follower, `job status`) replays the
 * tracking stream into its own. Lists scan: fine for development and `npm start`.
 */
export class MemoryJobStore implements JobStore {
  private readonly rows = new Map<string, JobRow>();
  /** Jobs pruned: a later record about one does not bring it back (see PostgresJobStore.prune). */
  private readonly pruned = new Set<string>();
  /**
   * Uniqueness keys claimed in this process (MemoryUniqueClaims), beside the rows their holders'
   * states are read from, as PostgreSQL keeps `<jobs>_unique` beside `<jobs>`; cleared with them.
   */
  readonly uniqueKeys = new Map<string, MemoryKey>();
  readonly foreign = new ForeignRecords();

  constructor(private readonly retentionOf: RetentionOf) {}

  /** Synchronous: the follower folds records as it reads them. */
  applyNow(records: readonly JobRecord[]): void {
    for (const record of records) {
      for (const child of childRecords(record)) this.fold(child);
      this.fold(record);
    }
  }

  apply(records: readonly JobRecord[]): Promise<void> {
    this.applyNow(records);
    return Promise.resolve();
  }

  get(id: string): Promise<JobRow | undefined> {
    return Promise.resolve(this.row(id));
  }

  /** get(), synchronously: a claim reads its holder and takes its key in one turn. */
  row(id: string): JobRow | undefined {
    return this.rows.get(id);
  }

  wasPruned(id: string): boolean {
    return this.pruned.has(id);
  }

  list(filter: JobFilter, page: JobPage): Promise<JobList> {
    const found: JobRow[] = [];
    for (const row of this.rows.values()) if ((page.cursor === undefined || row.id > page.cursor) && matches(row, filter)) found.push(row);
    found.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const jobs = found.slice(0, page.limit);
    const last = jobs.at(-1);
    return Promise.resolve(found.length > page.limit && last !== undefined ? { jobs, next_cursor: last.id } : { jobs });
  }

  prune(now: Date): Promise<number> {
    const iso = now.toISOString();
    let pruned = 0;
    for (const [id, row] of this.rows) {
      if (row.expires_at !== undefined && row.expires_at <= iso) {
        this.rows.delete(id);
        this.pruned.add(id);
        pruned++;
      }
    }
    return Promise.resolve(pruned);
  }

  clear(): Promise<number> {
    const cleared = this.rows.size;
    this.rows.clear();
    this.pruned.clear();
    this.uniqueKeys.clear();
    return Promise.resolve(cleared);
  }

  get size(): number {
    return this.rows.size;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private fold(record: JobRecord): void {
    if (this.pruned.has(record.job)) return;
    const row = this.rows.get(record.job);
    if (row !== undefined && isForeignRecord(row, record)) this.foreign.refuse(row, record);
    else this.rows.set(record.job, foldJob(row, record, this.retentionOf));
  }
}
