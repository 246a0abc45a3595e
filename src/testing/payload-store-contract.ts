import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { PayloadKey, PayloadStore } from '../payload/payload-store.js';

/** The parts of a mocha-like test runner the contract uses (mocha's globals by default). */
export interface ContractTestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>): void;
  beforeEach(body: () => Promise<void>): void;
  afterEach(body: () => Promise<void>): void;
}

export interface StoreContractOptions {
  /** Runs after each test, once the store is closed (drop a table, remove a directory). */
  cleanup?: () => Promise<void>;
  /** The test functions; mocha's globals unless given (node:test's `describe`, `it`, `beforeEach`, `afterEach` fit). */
  test?: ContractTestApi;
}

/**
 * The behaviour every {@link PayloadStore} owes the framework (src/payload/payload-store.ts), as
 * a test suite: stagecoach runs it against its filesystem and PostgreSQL stores, and a custom
 * store (an object store) can run it too:
 *
 * ```ts
 * import { describeStoreContract } from 'stagecoach/testing';
 * describeStoreContract('S3PayloadStore', () => new S3PayloadStore(testBucket()), { cleanup: emptyBucket });
 * ```
 *
 * @param factory an empty store, for each test (the test closes it).
 */
export function describeStoreContract(
  name: string,
  factory: () => PayloadStore | Promise<PayloadStore>,
  options: StoreContractOptions = {},
): void {
  const { describe, it, beforeEach, afterEach } = options.test ?? (globalThis as unknown as ContractTestApi);
  describe(`${name}: the PayloadStore contract`, () => {
    let store: PayloadStore;
    const key = (tenant = 'acme'): PayloadKey => ({ tenant, id: randomUUID() });

    beforeEach(async () => {
      store = await factory();
    });
    afterEach(async () => {
      await store.close();
      await options.cleanup?.();
    });

    it('gives back the bytes it was given, pending and committed', async () => {
      const ref = key();
      const data = Buffer.concat([Buffer.from('["a",1,'), randomBytes(1000), Buffer.from([0, 255, 0])]);
      await store.put(ref, data);
      assert.deepEqual(await store.get(ref), data, 'a pending payload is readable: its job may be consumed before the commit');
      await store.commit(ref);
      assert.deepEqual(await store.get(ref), data);
    });

    it('keeps a payload of several megabytes whole', async () => {
      const ref = key();
      const data = randomBytes(3 * 1024 * 1024);
      await store.put(ref, data);
      await store.commit(ref);
      assert.ok(data.equals((await store.get(ref)) ?? Buffer.alloc(0)));
    });

    it('answers undefined for a payload it does not have, and never throws for one', async () => {
      assert.equal(await store.get(key()), undefined);
      assert.equal(await store.get(key('_')), undefined);
    });

    it('keeps tenants apart: one id under two tenants is two payloads, and "_" is a tenant of its own', async () => {
      const id = randomUUID();
      await store.put({ tenant: 'acme', id }, Buffer.from('"acme"'));
      await store.put({ tenant: 'globex', id }, Buffer.from('"globex"'));
      await store.put({ tenant: '_', id }, Buffer.from('"none"'));
      assert.equal((await store.get({ tenant: 'acme', id }))?.toString(), '"acme"');
      assert.equal((await store.get({ tenant: 'globex', id }))?.toString(), '"globex"');
      assert.equal((await store.get({ tenant: '_', id }))?.toString(), '"none"');
      assert.equal(await store.get({ tenant: 'initech', id }), undefined);
      await store.delete({ tenant: 'acme', id });
      assert.equal((await store.get({ tenant: 'globex', id }))?.toString(), '"globex"');
      assert.deepEqual([await store.count('acme'), await store.count('globex'), await store.count('_'), await store.count()], [0, 1, 1, 2]);
    });

    it('never overwrites: a second put under a stored key fails and the first bytes stay', async () => {
      const ref = key();
      await store.put(ref, Buffer.from('"first"'));
      await assert.rejects(store.put(ref, Buffer.from('"second"')));
      await store.commit(ref);
      await assert.rejects(store.put(ref, Buffer.from('"third"')));
      assert.equal((await store.get(ref))?.toString(), '"first"');
      assert.equal(await store.count(), 1);
    });

    it('commits and deletes idempotently, and a commit after a delete brings nothing back', async () => {
      const ref = key();
      await store.commit(ref); // never stored
      await store.delete(ref); // never stored
      await store.put(ref, Buffer.from('[]'));
      await store.commit(ref);
      await store.commit(ref);
      await store.delete(ref);
      await store.delete(ref);
      await store.commit(ref); // the consumer was faster than the publisher's confirm
      assert.equal(await store.get(ref), undefined);
      assert.equal(await store.count(), 0);
    });

    it('answers has() (when the store has it) for pending, committed and missing payloads', async () => {
      if (store.has === undefined) return; // optional: callers fall back to get()
      const ref = key();
      assert.equal(await store.has(ref), false);
      await store.put(ref, Buffer.from('[1]'));
      assert.equal(await store.has(ref), true, 'pending');
      await store.commit(ref);
      assert.equal(await store.has(ref), true, 'committed');
      assert.equal(await store.has({ tenant: 'globex', id: ref.id }), false, "another tenant's");
      await store.delete(ref);
      assert.equal(await store.has(ref), false, 'deleted');
    });

    it('deletes a pending payload (a publish that failed)', async () => {
      const ref = key();
      await store.put(ref, Buffer.from('[]'));
      await store.delete(ref);
      assert.equal(await store.get(ref), undefined);
    });

    it('sweeps pending payloads stored before pendingBefore, and any stored before anyBefore', async () => {
      const pending = key();
      const committed = key('globex');
      await store.put(pending, Buffer.from('[1]'));
      await store.put(committed, Buffer.from('[2]'));
      await store.commit(committed);
      // Clocks of the store and of this process may differ a little: a minute either way.
      const past = new Date(Date.now() - 60_000);
      const future = new Date(Date.now() + 60_000);
      assert.equal(await store.sweep(past, past), 0, 'nothing is old enough');
      assert.equal(await store.sweep(future, past), 1, 'the pending one is an orphan');
      assert.equal(await store.get(pending), undefined);
      assert.equal((await store.get(committed))?.toString(), '[2]', 'a committed payload waits for its retention');
      assert.equal(await store.sweep(future, future), 1, 'past its retention');
      assert.equal(await store.count(), 0);
    });

    it('refuses keys that are not a tenant slug (or "_") and a UUID, with INVALID_PAYLOAD, before touching anything', async () => {
      const id = randomUUID();
      const bad: PayloadKey[] = [
        { tenant: '..', id },
        { tenant: '../acme', id },
        { tenant: 'acme/..', id },
        { tenant: 'Acme', id },
        { tenant: '', id },
        { tenant: 'acme.pdf', id },
        { tenant: 'acme', id: `../${id}` },
        { tenant: 'acme', id: `${id}/../../etc/passwd` },
        { tenant: 'acme', id: `${id}.pending` },
        { tenant: 'acme', id: 'not-a-uuid' },
        { tenant: 'acme', id: '' },
        { tenant: 'acme', id: `${id}'; DROP TABLE x; --` },
        { tenant: undefined, id } as unknown as PayloadKey,
        { tenant: 'acme', id: 42 } as unknown as PayloadKey,
      ];
      for (const ref of bad) {
        const invalid = (err: unknown): boolean => (err as { code?: string }).code === 'INVALID_PAYLOAD';
        await assert.rejects(store.put(ref, Buffer.from('[]')), invalid, `put ${JSON.stringify(ref)}`);
        await assert.rejects(store.get(ref), invalid, `get ${JSON.stringify(ref)}`);
        await assert.rejects(store.commit(ref), invalid, `commit ${JSON.stringify(ref)}`);
        await assert.rejects(store.delete(ref), invalid, `delete ${JSON.stringify(ref)}`);
        if (store.has !== undefined) await assert.rejects(store.has(ref), invalid, `has ${JSON.stringify(ref)}`);
      }
      await assert.rejects(store.count('../acme'), (err: unknown) => (err as { code?: string }).code === 'INVALID_PAYLOAD');
      assert.equal(await store.count(), 0);
    });

    it('takes many writers, readers and deleters at once', async () => {
      const refs = Array.from({ length: 40 }, (_, index) => key(index % 2 === 0 ? 'acme' : '_'));
      const data = (ref: PayloadKey): Buffer => Buffer.from(JSON.stringify([ref.id, 'x'.repeat(10_000)]));
      await Promise.all(refs.map((ref) => store.put(ref, data(ref))));
      // Commits race deletes of half of them (a consumer that settled before the publisher's commit).
      await Promise.all(refs.flatMap((ref, index) => (index % 4 < 2 ? [store.commit(ref), store.delete(ref)] : [store.commit(ref)])));
      const kept = refs.filter((_, index) => index % 4 >= 2);
      const read = await Promise.all(kept.map((ref) => store.get(ref)));
      read.forEach((bytes, index) => assert.deepEqual(bytes, data(kept[index])));
      assert.equal(await store.count(), kept.length);
      assert.equal(await store.count('acme'), kept.filter((ref) => ref.tenant === 'acme').length);
    });
  });
}
