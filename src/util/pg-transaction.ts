import type pg from 'pg';

/**
 * Runs `work` in one transaction on a client of its own from `pool`: committed when `work`
 * resolves, rolled back when it throws (the error is rethrown; a failed rollback does not hide
 * it), and the client returned to the pool either way.
 *
 * PostgreSQL may end the session under it (a fast shutdown, `pg_terminate_backend`, a failover):
 * the client then emits `'error'`, which the pool listens for only while a client is idle in it.
 * Held here, the client has a listener of its own, so the transaction fails alone (never the
 * process), and a client whose session ended is destroyed, not handed out again.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (err: Error): void => {
    lost ??= err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    if (lost === undefined) await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.off('error', onError);
    client.release(lost);
  }
}
