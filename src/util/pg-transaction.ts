import type pg from 'pg';

/**
 * Runs `work` in one transaction on a client of its own from `pool`: committed when `work`
 * resolves, rolled back when it throws (the error is rethrown; a failed rollback does not hide
 * it), and the client returned to the pool either way.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
