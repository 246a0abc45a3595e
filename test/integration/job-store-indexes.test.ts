import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import type { JobRecord } from '../../src/job-state/job-lifecycle.js';
import { PostgresJobStore } from '../../src/job-state/postgres-job-store.js';

const PG = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MINUTE = 60_000;

/** The table's indexes: name -> access method. */
async function indexesOf(db: pg.Pool, table: string): Promise<Map<string, string>> {
  const result = await db.query<{ name: string; method: string }>(
    `SELECT i.relname AS name, am.amname AS method FROM pg_index x
       JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid JOIN pg_am am ON am.oid = i.relam
       WHERE t.relname = $1`,
    [table],
  );
  return new Map(result.rows.map((row) => [row.name, row.method]));
}

function created(job: string, at: Date): JobRecord {
  return { kind: 'created', id: `c-${job}`, job, queue: 'work', tenant: 'acme', at: at.toISOString() };
}

function completed(job: string, at: Date): JobRecord {
  return {
    kind: 'settled',
    id: `s-${job}`,
    job,
    stage: 'worker',
    queue: 'work',
    tenant: 'acme',
    outcome: 'completed',
    attempt: 1,
    at: at.toISOString(),
  };
}

describe('PostgreSQL job store: the time columns indexed as BRIN (docs/job-state.md "Stores")', function () {
  this.timeout(60_000);
  const db = new pg.Pool({ connectionString: PG, max: 1 });
  const tables: string[] = [];
  const table = (): string => {
    const name = `jobs_idx_${randomBytes(4).toString('hex')}`;
    tables.push(name);
    return name;
  };

  after(async () => {
    for (const name of tables) await db.query(`DROP TABLE IF EXISTS "${name}", "${name}_unique"`);
    await db.end();
  });

  it('a new table gets BRIN indexes on created_at and expires_at, B-trees for the lookups', async () => {
    const name = table();
    const store = new PostgresJobStore(PG, name, () => MINUTE);
    try {
      await store.apply([created('j1', new Date())]);
    } finally {
      await store.close();
    }
    const indexes = await indexesOf(db, name);
    expect(indexes.get(`${name}_created_brin`)).to.equal('brin');
    expect(indexes.get(`${name}_expires_brin`)).to.equal('brin');
    for (const lookup of ['pkey', 'tenant_state', 'queue_state', 'type'])
      expect(indexes.get(`${name}_${lookup}`), lookup).to.equal('btree');
    expect(indexes.has(`${name}_created_at`)).to.equal(false);
  });

  it('migrates an older table: its B-trees on the time columns are replaced, its rows kept, and `--since` and pruning still answer', async () => {
    const name = table();
    // The shape an older version made: its rows stay, its two time B-trees go.
    await db.query(`CREATE TABLE "${name}" (id text PRIMARY KEY, tenant text, queue text, state text, type text, batch text,
      parent_id text, created_at timestamptz, expires_at timestamptz, doc jsonb, pruned_at timestamptz)`);
    await db.query(`CREATE INDEX "${name}_created_at" ON "${name}" (created_at)`);
    await db.query(`CREATE INDEX "${name}_expires_at" ON "${name}" (expires_at) WHERE expires_at IS NOT NULL`);
    const now = Date.now();
    const old = new Date(now - 10 * MINUTE);
    const store = new PostgresJobStore(PG, name, () => MINUTE);
    try {
      await store.apply([created('old', old), completed('old', old), created('new', new Date(now))]);
      const indexes = await indexesOf(db, name);
      expect(indexes.get(`${name}_created_brin`)).to.equal('brin');
      expect(indexes.get(`${name}_expires_brin`)).to.equal('brin');
      expect(indexes.has(`${name}_created_at`), 'old created_at B-tree').to.equal(false);
      expect(indexes.has(`${name}_expires_at`), 'old expires_at B-tree').to.equal(false);

      const since = await store.list({ since: new Date(now - MINUTE).toISOString() }, { limit: 10 });
      expect(since.jobs.map((job) => job.id)).to.deep.equal(['new']);
      // `old` ended ten minutes ago with a minute's retention: pruned; `new` is waiting, kept.
      expect(await store.prune(new Date(now))).to.equal(1);
      expect(await store.get('old')).to.equal(undefined);
      expect((await store.get('new'))?.state).to.equal('available');
    } finally {
      await store.close();
    }
  });
});
