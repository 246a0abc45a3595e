import pg from 'pg';
import { DEFAULT_PAYLOAD_POOL_SIZE, DEFAULT_PAYLOAD_TABLE } from '../config/defaults.js';
import { InvalidPayloadError, StagecoachError } from '../errors/errors.js';
import { checkPayloadKey, checkPayloadTenant } from './payload-key.js';
import type { PayloadKey, PayloadStore } from './payload-store.js';
import { inTransaction } from '../util/pg-transaction.js';

/**
 * A table name (the schema's `payloads.store.table` pattern; a unit test keeps them equal): unquoted-identifier characters, short enough for its index's name (`<table>_created_at`)
 * to stay within PostgreSQL's 63 bytes. A schema other than the first on the search path is set in
 * the URL (`?options=-c%20search_path%3Dpayloads`).
 */
export const PAYLOAD_TABLE_NAME = /^[a-z_][a-z0-9_]{0,49}$/;

export interface PostgresPayloadStoreOptions {
  /** The table; created at first use when missing. @defaultValue "stagecoach_payloads" */
  table?: string;
  /** Most connections the pool opens (`payloads.store.pool_size`). @defaultValue 4 */
  max?: number;
}

/** PostgreSQL's unique_violation: a second `put` of one key. */
const UNIQUE_VIOLATION = '23505';

/**
 * A payload store in a PostgreSQL table, for deployments that have a database rather than a
 * shared volume. Several processes share it safely: every operation is one statement.
 *
 * Schema (docs/payloads.md "Stores"; other languages read and write the same rows):
 *
 * ```sql
 * CREATE TABLE IF NOT EXISTS stagecoach_payloads (
 *   tenant     text        NOT NULL,  -- a tenant slug, or '_' for a job without one
 *   id         uuid        NOT NULL,
 *   data       bytea       NOT NULL,  -- the job's serialized args
 *   committed  boolean     NOT NULL DEFAULT false,
 *   created_at timestamptz NOT NULL DEFAULT now(),
 *   PRIMARY KEY (tenant, id)
 * );
 * CREATE INDEX IF NOT EXISTS stagecoach_payloads_created_at ON stagecoach_payloads (created_at);
 * ```
 *
 * `created_at` comes from the database's clock. The table is created at first use unless it
 * exists (so a user without CREATE rights works with a table an administrator made), under an
 * advisory lock so that processes starting together do not race.
 */
export class PostgresPayloadStore implements PayloadStore {
  readonly table: string;
  /** Most connections the pool opens. */
  readonly poolSize: number;
  private readonly pool: pg.Pool;
  private ready: Promise<void> | undefined;
  private closed: Promise<void> | undefined;

  /** @param url a PostgreSQL connection URL (`postgres://user@host:5432/db`); `PGPASSWORD` and the other libpq variables apply. */
  constructor(url: string, options: PostgresPayloadStoreOptions = {}) {
    this.table = options.table ?? DEFAULT_PAYLOAD_TABLE;
    if (!PAYLOAD_TABLE_NAME.test(this.table)) {
      throw new StagecoachError('INVALID_CONFIG', `payload table "${this.table}" is not a table name (${PAYLOAD_TABLE_NAME.source})`);
    }
    this.poolSize = options.max ?? DEFAULT_PAYLOAD_POOL_SIZE;
    this.pool = new pg.Pool({ connectionString: url, max: this.poolSize, idleTimeoutMillis: 30_000, allowExitOnIdle: true });
    // An idle connection dropped by the server (a restart) is replaced by the pool; the next
    // query reports a server that stays away. Without a listener the process would crash.
    this.pool.on('error', () => undefined);
  }

  async put(ref: PayloadKey, data: Buffer): Promise<void> {
    const { tenant, id } = checkPayloadKey(ref);
    try {
      await this.query(`INSERT INTO ${this.quoted} (tenant, id, data, committed) VALUES ($1, $2, $3, false)`, [tenant, id, data]);
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) {
        throw new InvalidPayloadError(`payload ${tenant}/${id} is stored already (a payload is never overwritten)`);
      }
      throw err;
    }
  }

  async commit(ref: PayloadKey): Promise<void> {
    const { tenant, id } = checkPayloadKey(ref);
    await this.query(`UPDATE ${this.quoted} SET committed = true WHERE tenant = $1 AND id = $2 AND NOT committed`, [tenant, id]);
  }

  async get(ref: PayloadKey): Promise<Buffer | undefined> {
    const { tenant, id } = checkPayloadKey(ref);
    const result = await this.query<{ data: Buffer }>(`SELECT data FROM ${this.quoted} WHERE tenant = $1 AND id = $2`, [tenant, id]);
    return result.rows[0]?.data;
  }

  async has(ref: PayloadKey): Promise<boolean> {
    const { tenant, id } = checkPayloadKey(ref);
    const result = await this.query(`SELECT 1 FROM ${this.quoted} WHERE tenant = $1 AND id = $2`, [tenant, id]);
    return result.rows.length > 0;
  }

  async delete(ref: PayloadKey): Promise<void> {
    const { tenant, id } = checkPayloadKey(ref);
    await this.query(`DELETE FROM ${this.quoted} WHERE tenant = $1 AND id = $2`, [tenant, id]);
  }

  async sweep(pendingBefore: Date, anyBefore: Date): Promise<number> {
    const result = await this.query(`DELETE FROM ${this.quoted} WHERE created_at < $2 OR (NOT committed AND created_at < $1)`, [
      pendingBefore,
      anyBefore,
    ]);
    return result.rowCount ?? 0;
  }

  async count(tenant?: string): Promise<number> {
    const result =
      tenant === undefined
        ? await this.query<{ count: number }>(`SELECT count(*)::int AS count FROM ${this.quoted}`)
        : await this.query<{ count: number }>(`SELECT count(*)::int AS count FROM ${this.quoted} WHERE tenant = $1`, [
            checkPayloadTenant(tenant),
          ]);
    return result.rows[0]?.count ?? 0;
  }

  /** Ends the pool's connections; later calls fail. Idempotent. */
  close(): Promise<void> {
    this.closed ??= this.pool.end();
    return this.closed;
  }

  private get quoted(): string {
    return `"${this.table}"`;
  }

  private async query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    await this.ensureTable();
    return this.pool.query<R>(text, values);
  }

  /** Creates the table once per store; a failed attempt (database away) is tried again by the next call. */
  private ensureTable(): Promise<void> {
    this.ready ??= this.createTable().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  private async createTable(): Promise<void> {
    const found = await this.pool.query<{ table: string | null }>('SELECT to_regclass($1)::text AS table', [this.quoted]);
    if (found.rows[0]?.table) return;
    await inTransaction(this.pool, async (client) => {
      // CREATE TABLE IF NOT EXISTS alone is not safe against a concurrent one (a unique violation
      // on the catalog): processes starting together take turns on a lock named after the table.
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`stagecoach payload table ${this.table}`]);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.quoted} (
           tenant text NOT NULL,
           id uuid NOT NULL,
           data bytea NOT NULL,
           committed boolean NOT NULL DEFAULT false,
           created_at timestamptz NOT NULL DEFAULT now(),
           PRIMARY KEY (tenant, id)
         )`,
      );
      await client.query(`CREATE INDEX IF NOT EXISTS "${this.table}_created_at" ON ${this.quoted} (created_at)`);
    });
  }
}
