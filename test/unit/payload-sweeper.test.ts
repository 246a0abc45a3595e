import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { MemoryPayloadStore } from '../../src/payload/memory-payload-store.js';
import { loadPayloadInfo, payloadInfo } from '../../src/payload/payload-info.js';
import type { PayloadKey, PayloadStore } from '../../src/payload/payload-store.js';
import {
  MAX_SWEEP_INTERVAL_MS,
  MIN_SWEEP_INTERVAL_MS,
  PayloadSweeper,
  sweepIntervalMs,
  sweepPayloads,
  type SweepResult,
} from '../../src/payload/payload-sweeper.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'payload-sweeper' }, 'error');
const PAYLOADS = { orphanAfterSeconds: 3600, retentionSeconds: 86_400 };
const key = (tenant = 'acme'): PayloadKey => ({ tenant, id: randomUUID() });

/** A store whose sweeps wait until released, and fail when told to. */
class GatedStore extends MemoryPayloadStore {
  sweeps = 0;
  failNext = false;
  private gate: { promise: Promise<void>; open: () => void } | undefined;

  hold(): void {
    let open: () => void = () => undefined;
    const promise = new Promise<void>((resolve) => (open = resolve));
    this.gate = { promise, open };
  }

  release(): void {
    this.gate?.open();
    this.gate = undefined;
  }

  override async sweep(pendingBefore: Date, anyBefore: Date): Promise<number> {
    this.sweeps++;
    await this.gate?.promise;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('store away');
    }
    return super.sweep(pendingBefore, anyBefore);
  }
}

describe('payload sweep', () => {
  it('sweeps every quarter of orphan_after, at least a second and at most an hour apart', () => {
    expect(sweepIntervalMs(3600)).to.equal(15 * 60 * 1000);
    expect(sweepIntervalMs(86_400)).to.equal(MAX_SWEEP_INTERVAL_MS);
    expect(sweepIntervalMs(1)).to.equal(MIN_SWEEP_INTERVAL_MS);
  });

  it('sweepPayloads deletes pending payloads older than orphan_after and any older than retention, and says where it cut', async () => {
    let clock = Date.now() - 2 * 3600 * 1000; // stored two hours ago
    const store = new MemoryPayloadStore(() => clock);
    const orphan = key();
    const kept = key();
    await store.put(orphan, Buffer.from('[1]'));
    await store.put(kept, Buffer.from('[2]'));
    await store.commit(kept);
    clock = Date.now() - 2 * 86_400 * 1000; // two days ago: past retention, committed or not
    const expired = key('globex');
    await store.put(expired, Buffer.from('[3]'));
    await store.commit(expired);
    const now = Date.now();
    const result = await sweepPayloads(store, PAYLOADS, now);
    expect(result).to.deep.equal({
      swept: 2,
      pending_before: new Date(now - 3600_000).toISOString(),
      any_before: new Date(now - 86_400_000).toISOString(),
    });
    expect(await store.get(orphan)).to.equal(undefined);
    expect(await store.get(expired)).to.equal(undefined);
    expect((await store.get(kept))?.toString()).to.equal('[2]');
  });

  describe('PayloadSweeper', () => {
    it('sweeps at start and then every interval until stopped; it cannot start twice or after stop', async () => {
      const clock = Date.now() - 2 * 3600 * 1000;
      const store = new MemoryPayloadStore(() => clock);
      const orphan = key();
      await store.put(orphan, Buffer.from('[1]'));
      const results: SweepResult[] = [];
      const sweeper = new PayloadSweeper({ store, payloads: PAYLOADS, log, intervalMs: 20, onSwept: (r) => results.push(r) });
      expect(sweeper.intervalMs).to.equal(20);
      expect(sweeper.state).to.equal('idle');
      sweeper.start();
      expect(() => sweeper.start()).to.throw(/cannot start: it is waiting/);
      await waitFor('three sweeps', () => results.length >= 3);
      expect(results.map((r) => r.swept).slice(0, 3)).to.deep.equal([1, 0, 0]);
      expect(await store.get(orphan)).to.equal(undefined);
      await sweeper.stop();
      expect(sweeper.state).to.equal('stopped');
      expect(() => sweeper.start()).to.throw(/cannot start: it is stopped/);
    });

    it('takes its interval from orphan_after by default', () => {
      const sweeper = new PayloadSweeper({
        store: new MemoryPayloadStore(),
        payloads: { orphanAfterSeconds: 600, retentionSeconds: 3600 },
        log,
      });
      expect(sweeper.intervalMs).to.equal(150_000);
    });

    it('stop() waits for the sweep under way, then no other sweep starts; every call gets the same promise', async () => {
      const store = new GatedStore();
      store.hold();
      const sweeper = new PayloadSweeper({ store, payloads: PAYLOADS, log, intervalMs: 1 });
      sweeper.start();
      await waitFor('a sweep under way', () => sweeper.state === 'sweeping');
      const stopping = sweeper.stop();
      expect(sweeper.stop()).to.equal(stopping);
      expect(sweeper.state).to.equal('stopping');
      let stopped = false;
      void stopping.then(() => (stopped = true));
      await new Promise((resolve) => setImmediate(resolve));
      expect(stopped, 'stop() returned while the sweep was still running').to.equal(false);
      store.release();
      await stopping;
      expect(sweeper.state).to.equal('stopped');
      expect(store.sweeps).to.equal(1);
    });

    it('stops at once when never started', async () => {
      const sweeper = new PayloadSweeper({ store: new MemoryPayloadStore(), payloads: PAYLOADS, log });
      await sweeper.stop();
      expect(sweeper.state).to.equal('stopped');
    });

    it('a failed sweep is logged and the next one runs', async () => {
      const store = new GatedStore();
      store.failNext = true;
      const results: SweepResult[] = [];
      const sweeper = new PayloadSweeper({ store, payloads: PAYLOADS, log, intervalMs: 5, onSwept: (r) => results.push(r) });
      sweeper.start();
      await waitFor('a sweep after the failed one', () => results.length >= 1);
      expect(store.sweeps).to.be.at.least(2);
      await sweeper.stop();
    });
  });
});

describe('payload info (dead list, dashboard)', () => {
  const headers = (ref: string, size?: number): Record<string, unknown> => ({
    'x-ojs-payload-ref': ref,
    ...(size === undefined ? {} : { 'x-ojs-payload-size': size }),
  });

  it('is undefined for a job with its arguments inline', async () => {
    const store = new MemoryPayloadStore();
    expect(await payloadInfo({ 'x-ojs-tenant': 'acme' }, store)).to.equal(undefined);
    expect(await loadPayloadInfo({}, store, 100)).to.equal(undefined);
  });

  it('says whether the store has it, without reading it when the store can answer has()', async () => {
    const store = new MemoryPayloadStore();
    const stored = key();
    await store.put(stored, Buffer.from('["a"]'));
    let reads = 0;
    const counting: PayloadStore = {
      ...bind(store),
      has: store.has.bind(store),
      get: (k: PayloadKey) => {
        reads++;
        return store.get(k);
      },
    };
    expect(await payloadInfo(headers(`acme/${stored.id}`, 5), counting)).to.deep.equal({ ref: `acme/${stored.id}`, size: 5, stored: true });
    expect(await payloadInfo(headers(`acme/${randomUUID()}`), counting)).to.include({ size: null, stored: false });
    expect(reads).to.equal(0);
    // A store without has(): read instead.
    const plain = bind(store);
    expect(await payloadInfo(headers(`acme/${stored.id}`, 5), plain)).to.include({ stored: true });
  });

  it('shows a malformed reference as it is, never looked up', async () => {
    expect(await payloadInfo(headers('../../etc/passwd', 3), new MemoryPayloadStore())).to.deep.equal({
      ref: '../../etc/passwd',
      size: 3,
      stored: false,
    });
  });

  it('loads the arguments under the cap; above it (by the size header, or by the bytes) says truncated; a missing one stored: false', async () => {
    const store = new MemoryPayloadStore();
    const small = key();
    await store.put(small, Buffer.from('["doc", {"pages": 2}]'));
    const big = key();
    await store.put(big, Buffer.from(JSON.stringify(['x'.repeat(200)])));
    const broken = key();
    await store.put(broken, Buffer.from('{"not": "an array"}'));
    expect(await loadPayloadInfo(headers(`acme/${small.id}`, 21), store, 100)).to.deep.equal({
      ref: `acme/${small.id}`,
      size: 21,
      stored: true,
      args: ['doc', { pages: 2 }],
    });
    expect(await loadPayloadInfo(headers(`acme/${big.id}`, 204), store, 100)).to.deep.equal({
      ref: `acme/${big.id}`,
      size: 204,
      stored: true,
      truncated: true,
    });
    expect(await loadPayloadInfo(headers(`acme/${big.id}`), store, 100)).to.include({ stored: true, truncated: true });
    expect(await loadPayloadInfo(headers(`acme/${broken.id}`), store, 100))
      .to.include({ stored: true })
      .and.to.have.property('error');
    const gone = `acme/${randomUUID()}`;
    expect(await loadPayloadInfo(headers(gone, 10), store, 100)).to.deep.equal({ ref: gone, size: 10, stored: false });
  });
});

/** The store's methods bound to it, as a plain object, without the optional has(). */
function bind(store: MemoryPayloadStore): PayloadStore {
  return {
    put: store.put.bind(store),
    commit: store.commit.bind(store),
    get: store.get.bind(store),
    delete: store.delete.bind(store),
    sweep: store.sweep.bind(store),
    count: store.count.bind(store),
    close: store.close.bind(store),
  };
}
