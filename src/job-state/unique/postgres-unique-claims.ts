import pg from 'pg';
import { claimsTableOf, migrateJobTable } from '../postgres-job-store.js';
import { inTransaction } from '../../util/pg-transaction.js';
import { decide, type ClaimOutcome, type HeldKey, type ClaimRequest, type UniqueClaims } from './unique-claims.js';

/** How often a claim is tried again when its key's row went away between the insert and the lock. */
const CLAIM_TRIES = 3;

/**
 * Uniqueness claims in PostgreSQL (docs/unique-jobs.md): table `<job table>_unique`, one row per
 * key. A claim inserts the key (`INSERT ... ON CONFLICT DO NOTHING`: of two at once, one wins and
 * the other waits for it); when the key is there, its row is locked and the holder's state read
 * from the job table in the same transaction: the key is taken over when the holder's window
 * (`period`, from its claim, by the database's clock) ran out or its state is not among the
 * policy's `states` (a holder the tracker has not folded yet counts as `available`), else the
 * job is a duplicate.
 */
export class PostgresUniqueClaims implements UniqueClaims {
  private readonly pool: pg.Pool;
  private ready: Promise<void> | undefined;
  private readonly claims: string;

  constructor(
    url: string,
    private readonly table: string,
  ) {
    // Small: claims are short transactions, at enqueue of unique jobs only. Idle connections go
    // after 10 s and never hold the process open.
    this.pool = new pg.Pool({ connectionString: url, max: 4, idleTimeoutMillis: 10_000, allowExitOnIdle: true });
    this.pool.on('error', () => undefined);
    this.claims = `"${claimsTableOf(table)}"`;
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    this.ready ??= migrateJobTable(this.pool, this.table).catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    await this.ready;
    for (let tries = 1; ; tries++) {
      const outcome = await this.tryClaim(request);
      if (outcome !== undefined || tries === CLAIM_TRIES) return outcome ?? { kind: 'claimed' };
    }
  }

  /** One transaction; undefined when the key's row was deleted between the insert and the lock. */
  private async tryClaim(request: ClaimRequest): Promise<ClaimOutcome | undefined> {
    const period = request.periodMs ?? null;
    return inTransaction(this.pool, async (client) => {
      const inserted = await client.query(
        `INSERT INTO ${this.claims} (key, job_id, tenant, claimed_at, expires_at)
         VALUES ($1, $2, $3, now(), now() + $4::double precision * interval '1 millisecond') ON CONFLICT (key) DO NOTHING`,
        [request.key, request.job, request.tenant ?? null, period],
      );
      if (inserted.rowCount === 1) return { kind: 'claimed' } as const;
      const found = await client.query<HeldKey>(
        `SELECT c.job_id, (extract(epoch FROM now() - c.claimed_at) * 1000)::double precision AS age_ms, j.doc,
           j.pruned_at IS NOT NULL AS pruned
         FROM ${this.claims} AS c LEFT JOIN "${this.table}" AS j ON j.id = c.job_id WHERE c.key = $1 FOR UPDATE OF c`,
        [request.key],
      );
      const row = found.rows[0];
      if (row === undefined) return undefined;
      const outcome = decide(request, row);
      if (outcome.kind !== 'held' && row.job_id !== request.job) {
        await client.query(
          `UPDATE ${this.claims} SET job_id = $2, tenant = $3, claimed_at = now(),
             expires_at = now() + $4::double precision * interval '1 millisecond' WHERE key = $1`,
          [request.key, request.job, request.tenant ?? null, period],
        );
      }
      return outcome;
    });
  }

  async release(key: string, job: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.claims} WHERE key = $1 AND job_id = $2`, [key, job]);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
