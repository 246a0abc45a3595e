import { expect } from 'chai';
import { BatchFold, type TrackedBatch } from '../../src/batch/batch-fold.js';
import { batchView, jobSummary, jobView } from '../../src/batch/batch-views.js';

const at = '2026-01-01T00:00:00.000Z';

describe('batch and job views (the JSON of `batch status --json` and the admin API)', () => {
  const fold = new BatchFold();
  fold.apply({ kind: 'created', id: 'c1', job: 'root', batch: 'b1', tenant: 'acme', queue: 'scans', type: 'scan', at });
  fold.apply({
    kind: 'settled',
    id: 'r1',
    job: 'root',
    batch: 'b1',
    tenant: 'acme',
    stage: 'scanner',
    queue: 'scans',
    type: 'scan',
    outcome: 'completed',
    attempt: 1,
    emitted: ['a'],
    at,
  });
  fold.apply({
    kind: 'settled',
    id: 'r2',
    job: 'a',
    batch: 'b1',
    tenant: 'acme',
    stage: 'reader',
    queue: 'files',
    type: 'file',
    outcome: 'dead',
    attempt: 2,
    error: { type: 'UnreadableError', message: 'no' },
    at,
  });

  it('shows a batch in the DESIGN.md shape, then what else the fold knows of it, and nothing the fold keeps for itself', () => {
    const batch = fold.batch('b1') as TrackedBatch;
    expect(batchView(batch)).to.deep.equal({
      id: 'b1',
      tenant: 'acme',
      state: 'completed',
      jobs: { known: 2, completed: 1, failed: 1, dead: 1, discarded: 0, cancelled: 0, in_flight: 0 },
      announced: false,
      cancelled: false,
      paused: false,
      refused: 0,
      conflicts: 0,
      callbacks: [],
      first_seen: at,
      last_seen: at,
    });
    expect(Object.keys(batchView(batch)).slice(0, 4)).to.deep.equal(['id', 'tenant', 'state', 'jobs']);
    expect(batchView({ ...batch, paused: true, internal: 1 } as TrackedBatch))
      .to.include({ paused: true })
      .and.not.have.property('internal');
  });

  it('shows a job with its error, stage and history, and a summary without the history', () => {
    const job = fold.job('a')!;
    expect(jobView(job)).to.deep.equal({
      id: 'a',
      batch: 'b1',
      tenant: 'acme',
      type: 'file',
      queue: 'files',
      state: 'dead',
      outcome: 'dead',
      attempts: 2,
      stage: 'reader',
      error: { type: 'UnreadableError', message: 'no' },
      parent: 'root',
      children: [],
      conflict: false,
      history: [{ at, stage: 'reader', outcome: 'dead', attempt: 2 }],
    });
    const summary = jobSummary(fold.job('root')!);
    expect(summary).to.include({ id: 'root', state: 'completed', children: 1, parent: null });
    expect(summary).not.to.have.property('history');
  });
});
