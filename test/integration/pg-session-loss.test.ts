import { expect } from 'chai';
import pg from 'pg';
import { inTransaction } from '../../src/util/pg-transaction.js';

const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * PostgreSQL ends sessions on its own (a fast shutdown, `pg_terminate_backend`, a failover): a
 * client held in a transaction then emits `'error'` while no query of it runs. Every store of
 * stagecoach (job store, unique claims, payloads) takes its transactions through inTransaction.
 */
describe('a PostgreSQL session ended under a transaction', function () {
  this.timeout(30_000);
  let pool: pg.Pool;
  let admin: pg.Client;

  before(async () => {
    pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
    pool.on('error', () => undefined);
    admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
  });

  after(async () => {
    await pool?.end();
    await admin?.end();
  });

  it('fails that transaction alone: no unhandled error, and the pool serves the next one', async () => {
    const outcome = await inTransaction(pool, async (client) => {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
      // The session's end reaches the client while it runs no query (as a store awaits something else).
      await new Promise<void>((resolve) => client.once('end', () => resolve()));
      await client.query('SELECT 1');
    }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(outcome, 'the transaction fails').to.be.instanceOf(Error);
    const { rows } = await inTransaction(pool, (client) => client.query<{ one: number }>('SELECT 1 AS one'));
    expect(rows[0].one).to.equal(1);
  });
});
