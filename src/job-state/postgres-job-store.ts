import pg from 'pg';
import { StagecoachError } from '../errors/errors.js';
import { childRecords, foldJob, isForeignRecord, type JobRecord, type JobRow, type RetentionOf } from './job-lifecycle.js';
import type { JobFilter, JobList, JobPage, JobStore } from './job-store.js';
import { ForeignRecords } from './foreign-records.js';
import { inTransaction } from '../util/pg-transaction.js';

/** A table name: unquoted-identifier characters, short enough for its indexes' names (`<table>_queue_state`). */
export const JOB_TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/** The columns the migration makes sure of, beyond `id` (added to an older table one by one). */
const COLUMNS: ReadonlyArray<[string, string]> = [
  ['tenant', 'text'],
  ['queue', 'text'],
  ['state', 'text'],
  ['type', 'text'],
  ['batch', 'text'],
  ['parent_id', 'text'],
  ['created_at', 'timestamptz'],
  ['expires_at', 'timestamptz'],
  ['doc', 'jsonb'],
  ['pruned_at', 'timestamptz'],
];

/**
 * A row's indexed columns, read by the database from its document (JobRow): the rows travel as
 * their documents alone, half the JSON both sides parse and write (bench `--only jobstate`).
 */
const COLUMNS_OF_DOC = `x.doc->>'id' AS id, x.doc->>'tenant' AS tenant, x.doc->>'queue' AS queue, x.doc->>'state' AS state,
  x.doc->>'type' AS type, x.doc->>'batch' AS batch, x.doc->>'parent_id' AS parent_id,
  (x.doc->>'created_at')::timestamptz AS created_at, (x.doc->>'expires_at')::timestamptz AS expires_at, x.doc AS doc`;

/**
 * The lookups' indexes (`job list` filters, ordered by id for paging) and pruning's. The two time
 * columns are BRIN, not B-tree: a row is written two or three times in its life (created, then
 * ended, and for a relayed job its child inserted), never as a heap-only update (`state`
 * changes), so every index costs on every write; a BRIN index is a summary per range of pages,
 * updated only when a value widens its range, and rows arrive roughly in time order, so `--since`
 * and pruning read few ranges. Measured with `npm run bench -- --only jobstate`: PostgreSQL's CPU
 * per tracked job about a fifth lower (docs/performance.md "Job tracking").
 */
const INDEXES: ReadonlyArray<[string, string]> = [
  ['tenant_state', '(tenant, state, id)'],
  ['queue_state', '(queue, state, id)'],
  ['type', '(type, id)'],
  ['created_brin', 'USING brin (created_at) WITH (autosummarize = on)'],
  ['expires_brin', 'USING brin (expires_at) WITH (autosummarize = on)'],
  // Only rows with tags are in it (`job list --tag`): a job without tags costs this index nothing.
  ['tags', "USING gin ((doc->'tags')) WHERE doc ? 'tags'"],
];

/** Indexes an older version made, dropped by the migration: the B-trees the BRIN ones replace. */
const RETIRED_INDEXES: readonly string[] = ['created_at', 'expires_at'];

/**
 * The job store in a PostgreSQL table (`tracking.store: { kind: "postgres", url, table }`;
 * docs/job-state.md "Stores"): one row per job, the indexed fields as columns and the whole row
 * (JobRow) in `doc`. Created, and migrated (columns and indexes added when missing), at first
 * use under an advisory lock.
 *
 * A batch of records is one transaction: the rows it names are inserted when new, locked in id
 * order (two trackers writing the same jobs take turns, never deadlock), folded in JavaScript by
 * foldJob and written back. foldJob is commutative and idempotent, so duplicates, a replay after
 * a restart or a crash mid-batch (the transaction rolls back and the replay applies it again) and
 * two trackers at once all leave the same rows.
 */
export class PostgresJobStore implements JobStore {
  private readonly pool: pg.Pool;
  readonly foreign = new ForeignRecords();
  private ready: Promise<void> | undefined;

  constructor(
    url: string,
    readonly table: string,
    private readonly retentionOf: RetentionOf,
    /** How long a pruned job's tombstone is kept: the tracking stream's `max_age`. */
    private readonly tombstonesFor: number = 7 * 86_400_000,
  ) {
    if (!JOB_TABLE_NAME.test(table)) {
      throw new StagecoachError('INVALID_CONFIG', `job table "${table}" is not a table name (${JOB_TABLE_NAME.source})`);
    }
    this.pool = new pg.Pool({ connectionString: url, max: 4, idleTimeoutMillis: 30_000, allowExitOnIdle: true });
    // An idle connection dropped by the server is replaced; the next query reports a server that stays away.
    this.pool.on('error', () => undefined);
  }

  async apply(records: readonly JobRecord[]): Promise<void> {
    if (records.length === 0) return;
    const byJob = new Map<string, JobRecord[]>();
    const add = (record: JobRecord): void => {
      const list = byJob.get(record.job);
      if (list === undefined) byJob.set(record.job, [record]);
      else list.push(record);
    };
    for (const record of records) {
      for (const child of childRecords(record)) add(child);
      add(record);
    }
    const ids = [...byJob.keys()].sort();
    await this.ensureTable();
    // Another tenant's records, per job as last folded (a row inserted meanwhile is folded again),
    // told once the transaction is committed.
    const refused = new Map<string, Array<[JobRow, JobRecord]>>();
    const fold = (id: string, doc: JobRow | undefined): JobRow => {
      let row = doc;
      const foreign: Array<[JobRow, JobRecord]> = [];
      for (const record of byJob.get(id) ?? []) {
        if (row !== undefined && isForeignRecord(row, record)) foreign.push([row, record]);
        else row = foldJob(row, record, this.retentionOf);
      }
      refused.set(id, foreign);
      return row as JobRow;
    };
    await inTransaction(this.pool, async (client) => {
      // The rows there already, locked in id order, pruned ones left out: a pruned job's
      // tombstone stays pruned, a replay must not bring it back.
      const locked = async (wanted: readonly string[]): Promise<Map<string, JobRow | undefined>> => {
        const found = await client.query<{ id: string; doc: JobRow | null; pruned: boolean }>(
          `SELECT id, doc, pruned_at IS NOT NULL AS pruned FROM ${this.quoted} WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`,
          [wanted],
        );
        const rows = new Map<string, JobRow | undefined>();
        for (const row of found.rows) {
          if (row.pruned) byJob.delete(row.id);
          else rows.set(row.id, row.doc ?? undefined);
        }
        return rows;
      };
      const existing = await locked(ids);
      // New jobs are inserted whole, in id order: one row version and one entry per index, where
      // an empty insert then an update wrote each twice. A row another tracker inserted meanwhile
      // is skipped here (ON CONFLICT waits for its transaction), then locked and folded as existing.
      const fresh = ids.filter((id) => byJob.has(id) && !existing.has(id));
      if (fresh.length > 0) {
        const inserted = await client.query<{ id: string }>(
          `INSERT INTO ${this.quoted} (id, tenant, queue, state, type, batch, parent_id, created_at, expires_at, doc)
           SELECT ${COLUMNS_OF_DOC} FROM jsonb_array_elements($1::jsonb) AS x(doc) ORDER BY 1
           ON CONFLICT (id) DO NOTHING RETURNING id`,
          [JSON.stringify(fresh.map((id) => fold(id, undefined)))],
        );
        if (inserted.rows.length < fresh.length) {
          const done = new Set(inserted.rows.map((row) => row.id));
          for (const [id, doc] of await locked(fresh.filter((id) => !done.has(id)))) existing.set(id, doc);
        }
      }
      if (existing.size === 0) return;
      await client.query(
        `UPDATE ${this.quoted} AS t SET tenant = x.tenant, queue = x.queue, state = x.state, type = x.type, batch = x.batch,
           parent_id = x.parent_id, created_at = x.created_at, expires_at = x.expires_at, doc = x.doc
         FROM (SELECT ${COLUMNS_OF_DOC} FROM jsonb_array_elements($1::jsonb) AS x(doc)) AS x
         WHERE t.id = x.id`,
        [JSON.stringify([...existing].map(([id, doc]) => fold(id, doc)))],
      );
    });
    for (const foreign of refused.values()) for (const [row, record] of foreign) this.foreign.refuse(row, record);
  }

  async get(id: string): Promise<JobRow | undefined> {
    await this.ensureTable();
    const result = await this.pool.query<{ doc: JobRow | null }>(`SELECT doc FROM ${this.quoted} WHERE id = $1`, [id]);
    return result.rows[0]?.doc ?? undefined;
  }

  async list(filter: JobFilter, page: JobPage): Promise<JobList> {
    await this.ensureTable();
    const where: string[] = ['doc IS NOT NULL'];
    const values: unknown[] = [];
    const param = (value: unknown): string => {
      values.push(value);
      return `$${values.length}`;
    };
    for (const field of ['tenant', 'queue', 'state', 'type'] as const) {
      const value = filter[field];
      if (value !== undefined) where.push(`${field} = ${param(value)}`);
    }
    // Repeats the partial index's predicate, so that the planner may use it.
    if (filter.tag !== undefined) where.push(`doc ? 'tags' AND doc->'tags' ? ${param(filter.tag)}`);
    if (filter.since !== undefined) where.push(`created_at >= ${param(filter.since)}::timestamptz`);
    if (page.cursor !== undefined) where.push(`id > ${param(page.cursor)}`);
    const result = await this.pool.query<{ doc: JobRow }>(
      `SELECT doc FROM ${this.quoted} WHERE ${where.join(' AND ')} ORDER BY id LIMIT ${param(page.limit + 1)}`,
      values,
    );
    const jobs = result.rows.slice(0, page.limit).map((row) => row.doc);
    const last = jobs.at(-1);
    return result.rows.length > page.limit && last !== undefined ? { jobs, next_cursor: last.id } : { jobs };
  }

  /**
   * Prunes to a tombstone (id and `pruned_at` only), so that a tracker replaying the stream does
   * not bring the job back; tombstones go once the stream cannot hold their records any more
   * (`tombstonesFor`, the stream's `tracking.max_age`).
   */
  async prune(now: Date): Promise<number> {
    await this.ensureTable();
    const result = await this.pool.query(
      `UPDATE ${this.quoted} SET doc = NULL, tenant = NULL, queue = NULL, state = NULL, type = NULL, batch = NULL, parent_id = NULL,
         expires_at = NULL, pruned_at = $1 WHERE expires_at <= $1`,
      [now.toISOString()],
    );
    await this.pool.query(`DELETE FROM ${this.quoted} WHERE pruned_at < $1`, [new Date(now.getTime() - this.tombstonesFor).toISOString()]);
    // Claims past their period, or of jobs no longer kept, hold nothing: a claim is taken over
    // when it no longer holds anyway (PostgresUniqueClaims), this only keeps the table small.
    await this.pool.query(
      `DELETE FROM "${claimsTableOf(this.table)}" AS c WHERE c.expires_at <= $1
         OR EXISTS (SELECT 1 FROM ${this.quoted} AS j WHERE j.id = c.job_id AND j.pruned_at IS NOT NULL)`,
      [now.toISOString()],
    );
    return result.rowCount ?? 0;
  }

  async clear(): Promise<number> {
    await this.ensureTable();
    await this.pool.query(`DELETE FROM "${claimsTableOf(this.table)}"`);
    return (await this.pool.query(`DELETE FROM ${this.quoted}`)).rowCount ?? 0;
  }

  /** Drops the table and its uniqueness claims (tests). */
  async drop(): Promise<void> {
    await this.pool.query(`DROP TABLE IF EXISTS ${this.quoted}, "${claimsTableOf(this.table)}"`);
    this.ready = undefined;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private get quoted(): string {
    return `"${this.table}"`;
  }

  /** Creates or migrates the table once per store; a failed attempt (database away) is tried again by the next call. */
  private ensureTable(): Promise<void> {
    this.ready ??= this.migrate().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  private async migrate(): Promise<void> {
    await migrateJobTable(this.pool, this.table);
  }
}

/** The table of uniqueness claims beside a job table (docs/unique-jobs.md). */
export function claimsTableOf(table: string): string {
  return `${table}_unique`;
}

/**
 * Creates or migrates a job table and the uniqueness claims beside it, under an advisory lock
 * (concurrent CREATE ... IF NOT EXISTS can still collide in the catalog: trackers and producers
 * take turns). Producers claiming unique keys run it too: they may start before any tracker.
 */
export async function migrateJobTable(pool: pg.Pool, table: string): Promise<void> {
  const quoted = `"${table}"`;
  await inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`stagecoach job table ${table}`]);
    await client.query(`CREATE TABLE IF NOT EXISTS ${quoted} (id text PRIMARY KEY)`);
    for (const [column, type] of COLUMNS) await client.query(`ALTER TABLE ${quoted} ADD COLUMN IF NOT EXISTS ${column} ${type}`);
    for (const [name, definition] of INDEXES) {
      await client.query(`CREATE INDEX IF NOT EXISTS "${table}_${name}" ON ${quoted} ${definition}`);
    }
    for (const name of RETIRED_INDEXES) await client.query(`DROP INDEX IF EXISTS "${table}_${name}"`);
    // One row per uniqueness key: the job holding it, since when, and until when at most
    // (`expires_at`, the policy's period; NULL: while the job is in the policy's states).
    await client.query(
      `CREATE TABLE IF NOT EXISTS "${claimsTableOf(table)}" (key text PRIMARY KEY, job_id text NOT NULL, tenant text,
         claimed_at timestamptz NOT NULL, expires_at timestamptz)`,
    );
  });
}
