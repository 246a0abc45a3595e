import { expect } from 'chai';
import { DirectiveGate, type CancelledJobs } from '../../src/runner/handling/directive-gate.js';
import { foldJob, shownState, type JobRecord, type JobRow } from '../../src/job-state/job-lifecycle.js';
import { MemoryJobStore } from '../../src/job-state/memory-job-store.js';
import type { Logger } from '../../src/logging/logger.js';

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;
const DAY = 86_400_000;
const keep = (): number => DAY;
const at = (s: number): string => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const base = { job: 'j1', queue: 'files', stage: 'reader', type: 'file', tenant: 'acme' };

/** A failing job: created, two failed attempts, then dead (OJS `discarded`). */
const HISTORY: JobRecord[] = [
  { kind: 'created', id: 'c', job: 'j1', queue: 'files', type: 'file', tenant: 'acme', at: at(0) },
  { kind: 'settled', id: 's1', ...base, outcome: 'started', attempt: 1, at: at(1) },
  { kind: 'settled', id: 'r1', ...base, outcome: 'retrying', attempt: 1, next_attempt: 2, error: { type: 'E', message: 'one' }, at: at(2) },
  { kind: 'settled', id: 's2', ...base, outcome: 'started', attempt: 2, at: at(3) },
  { kind: 'settled', id: 'd2', ...base, outcome: 'dead', attempt: 2, error: { type: 'E', message: 'two' }, at: at(4) },
];

function fold(records: readonly JobRecord[]): JobRow {
  let row: JobRow | undefined;
  for (const record of records) row = foldJob(row, record, keep);
  return row as JobRow;
}

describe('job lifecycle fold (docs/job-state.md)', () => {
  it('walks available, active, retryable, active, discarded with one error per attempt', () => {
    const states = HISTORY.map((_, i) => fold(HISTORY.slice(0, i + 1)).state);
    expect(states).to.deep.equal(['available', 'active', 'retryable', 'active', 'discarded']);
    const row = fold(HISTORY);
    expect(row.errors.map((e) => [e.attempt, e.message])).to.deep.equal([
      [1, 'one'],
      [2, 'two'],
    ]);
    expect(row).to.deep.include({
      attempt: 2,
      outcome: 'dead',
      created_at: at(0),
      started_at: at(3),
      expires_at: new Date(Date.parse(at(4)) + DAY).toISOString(),
    });
  });

  it('gives the same row whatever the order and however many duplicates (two trackers, a replay)', () => {
    const expected = fold(HISTORY);
    const orders = [[...HISTORY].reverse(), [HISTORY[3], HISTORY[0], HISTORY[4], HISTORY[1], HISTORY[2]], [...HISTORY, ...HISTORY]];
    for (const order of orders) expect(fold(order as JobRecord[])).to.deep.equal(expected);
  });

  it('a crash: active, then available again when the redelivery moves it to suspect', () => {
    const crashed: JobRecord[] = [HISTORY[0] as JobRecord, HISTORY[1] as JobRecord];
    expect(fold(crashed).state).to.equal('active');
    const suspect: JobRecord = {
      kind: 'settled',
      id: 'x',
      ...base,
      outcome: 'suspect',
      attempt: 1,
      next_attempt: 2,
      error: { type: 'CRASH', message: 'redelivered' },
      at: at(9),
    };
    expect(fold([...crashed, suspect]).state).to.equal('available');
  });

  it('a recorded cancel shows a waiting job cancelled, not an active or ended one', () => {
    const cancel: JobRecord = { kind: 'directive', id: 'k', action: 'cancel', job: 'j1', at: at(5) };
    expect(shownState(fold([HISTORY[0] as JobRecord, cancel]))).to.equal('cancelled');
    expect(shownState(fold([HISTORY[0] as JobRecord, HISTORY[1] as JobRecord, cancel]))).to.equal('active');
  });

  it('the memory store lists by filter a page at a time and prunes what expired', async () => {
    const store = new MemoryJobStore(() => 0);
    await store.apply(HISTORY);
    await store.apply([{ kind: 'created', id: 'c2', job: 'j2', queue: 'files', type: 'file', tenant: 'acme', at: at(1) }]);
    const first = await store.list({ tenant: 'acme' }, { limit: 1 });
    expect(first.jobs.map((j) => j.id)).to.deep.equal(['j1']);
    expect((await store.list({ tenant: 'acme' }, { limit: 1, cursor: first.next_cursor as string })).jobs.map((j) => j.id)).to.deep.equal([
      'j2',
    ]);
    expect((await store.list({ state: 'discarded' }, { limit: 10 })).jobs.map((j) => j.id)).to.deep.equal(['j1']);
    expect(await store.prune(new Date())).to.equal(1);
    expect(await store.get('j1')).to.equal(undefined);
  });

  it('a directive gate holding 10,000 cancelled ids answers every delivery with one set lookup', () => {
    const ids = new Set(Array.from({ length: 10_000 }, (_, i) => `cancelled-${i}`));
    const cancels: CancelledJobs = { has: (id) => ids.has(id), close: () => Promise.resolve() };
    const gate = new DirectiveGate('p', silent);
    gate.attach({ createChannel: () => Promise.reject(new Error('no broker')) } as never, cancels);
    let cancelled = 0;
    for (let i = 0; i < 100_000; i++) {
      const verdict = gate.verdict({ id: i % 2 === 0 ? `cancelled-${i % 10_000}` : `job-${i}`, meta: {} });
      // Synchronous for every job: no probe, no promise on the hot path.
      expect(typeof verdict).to.equal('string');
      if (verdict === 'cancel-job') cancelled++;
    }
    expect(cancelled).to.equal(50_000);
  });
});
