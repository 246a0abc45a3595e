import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { PostgresPayloadStore } from '../../src/payload/postgres-payload-store.js';
import type { PayloadKey } from '../../src/payload/payload-store.js';
import { describeStoreContract } from '../helpers/store-contract.js';

/** The PostgreSQL of the machine (CI: trust auth on 127.0.0.1, database `test`). */
const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A table name no other run uses; dropped after each test. */
const uniqueTable = (): string => `test_payloads_${randomBytes(5).toString('hex')}`;

/** A plain client, independent of the store: it plays the administrator and the other language. */
async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]> {
  const client = new pg.Client(POSTGRES_URL);
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

const drop = (table: string): Promise<unknown> => sql(`DROP TABLE IF EXISTS "${table}"`);

let contractTable = '';
describeStoreContract('PostgresPayloadStore', () => new PostgresPayloadStore(POSTGRES_URL, { table: (contractTable = uniqueTable()) }), {
  cleanup: () => drop(contractTable).then(() => undefined),
});

describe('PostgresPayloadStore', () => {
  let table: string;
  let store: PostgresPayloadStore;
  const key = (tenant = 'acme'): PayloadKey => ({ tenant, id: randomUUID() });

  beforeEach(() => {
    table = uniqueTable();
    store = new PostgresPayloadStore(POSTGRES_URL, { table });
  });
  afterEach(async () => {
    await store.close();
    await drop(table);
  });

  it('creates the documented table at first use: (tenant text, id uuid, data bytea, committed boolean, created_at timestamptz), keyed (tenant, id)', async () => {
    expect(await sql(`SELECT to_regclass($1)::text AS t`, [table])).to.deep.equal([{ t: null }]);
    await store.put(key(), Buffer.from('[]'));
    const columns = await sql<{ column_name: string; data_type: string; is_nullable: string }>(
      `SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`,
      [table],
    );
    expect(columns.map((column) => [column.column_name, column.data_type, column.is_nullable])).to.deep.equal([
      ['tenant', 'text', 'NO'],
      ['id', 'uuid', 'NO'],
      ['data', 'bytea', 'NO'],
      ['committed', 'boolean', 'NO'],
      ['created_at', 'timestamp with time zone', 'NO'],
    ]);
    const primary = await sql<{ attname: string }>(
      `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
        WHERE i.indrelid = $1::regclass AND i.indisprimary ORDER BY a.attname`,
      [table],
    );
    expect(primary.map((row) => row.attname)).to.deep.equal(['id', 'tenant']);
  });

  it('keeps rows another program reads and writes by the documented schema', async () => {
    const ref = key('globex');
    await store.put(ref, Buffer.from('["from node"]'));
    const rows = await sql<{ data: Buffer; committed: boolean }>(`SELECT data, committed FROM "${table}" WHERE tenant = $1 AND id = $2`, [
      ref.tenant,
      ref.id,
    ]);
    expect(rows.map((row) => [row.data.toString(), row.committed])).to.deep.equal([['["from node"]', false]]);
    await store.commit(ref);
    expect((await sql(`SELECT committed FROM "${table}"`))[0]).to.deep.equal({ committed: true });
    const other = key('_');
    await sql(`INSERT INTO "${table}" (tenant, id, data, committed) VALUES ($1, $2, convert_to('["from python"]', 'UTF8'), true)`, [
      other.tenant,
      other.id,
    ]);
    expect((await store.get(other))?.toString()).to.equal('["from python"]');
  });

  it('sweeps by created_at: pending rows stored before pendingBefore, any row stored before anyBefore', async () => {
    const oldPending = key();
    const newPending = key();
    const oldCommitted = key('globex');
    const veryOld = key('_');
    for (const ref of [oldPending, newPending, oldCommitted, veryOld]) await store.put(ref, Buffer.from('[]'));
    for (const ref of [oldCommitted, veryOld]) await store.commit(ref);
    const backdate = (ref: PayloadKey, interval: string): Promise<unknown> =>
      sql(`UPDATE "${table}" SET created_at = now() - $3::interval WHERE tenant = $1 AND id = $2`, [ref.tenant, ref.id, interval]);
    await backdate(oldPending, '2 hours');
    await backdate(oldCommitted, '2 hours');
    await backdate(veryOld, '40 days');
    expect(await store.sweep(new Date(Date.now() - 3600_000), new Date(Date.now() - 30 * 86400_000))).to.equal(2);
    expect(await store.get(oldPending)).to.equal(undefined);
    expect(await store.get(veryOld)).to.equal(undefined);
    expect(await store.get(newPending)).to.not.equal(undefined);
    expect(await store.get(oldCommitted)).to.not.equal(undefined);
  });

  it('is made once when many processes start on a fresh table at once', async () => {
    const stores = Array.from({ length: 8 }, () => new PostgresPayloadStore(POSTGRES_URL, { table }));
    try {
      await Promise.all(stores.map((each) => each.put(key(), Buffer.from('[]'))));
      expect(await store.count()).to.equal(8);
    } finally {
      await Promise.all(stores.map((each) => each.close()));
    }
  });

  it('works with a table an administrator made, for a user who may not create tables', async () => {
    const restricted = `test_payloads_user_${randomBytes(4).toString('hex')}`;
    await store.count(); // the administrator's store makes the table
    await sql(`CREATE ROLE ${restricted} LOGIN`);
    try {
      await sql(`REVOKE CREATE ON SCHEMA public FROM ${restricted}`);
      await sql(`GRANT SELECT, INSERT, UPDATE, DELETE ON "${table}" TO ${restricted}`);
      const url = new URL(POSTGRES_URL);
      url.username = restricted;
      const user = new PostgresPayloadStore(url.toString(), { table });
      try {
        const ref = key();
        await user.put(ref, Buffer.from('[1]'));
        expect((await user.get(ref))?.toString()).to.equal('[1]');
      } finally {
        await user.close();
      }
    } finally {
      await sql(`DROP OWNED BY ${restricted}`);
      await sql(`DROP ROLE ${restricted}`);
    }
  });

  it('fails a call while the database is unreachable, and works once it answers (the table is made then)', async () => {
    const away = new PostgresPayloadStore('postgres://postgres@127.0.0.1:1/test', { table });
    try {
      const error = await away.get(key()).then(
        () => undefined,
        (err: unknown) => err as Error,
      );
      expect(error).to.be.instanceOf(Error);
    } finally {
      await away.close();
    }
    await store.put(key(), Buffer.from('[]'));
    expect(await store.count()).to.equal(1);
  });

  it('refuses a table name that is not a plain identifier, and closes more than once', async () => {
    expect(() => new PostgresPayloadStore(POSTGRES_URL, { table: 'payloads"; DROP TABLE x; --' })).to.throw(/not a table name/);
    expect(() => new PostgresPayloadStore(POSTGRES_URL, { table: 'Payloads' })).to.throw(/not a table name/);
    await store.close();
    await store.close();
  });
});
