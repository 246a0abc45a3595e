import { expect } from 'chai';
import { BatchFold, batchState, jobState } from '../../src/batch/batch-fold.js';
import type { CreatedReport, DirectiveRecord, SettledReport } from '../../src/tracking-stream/tracking-report.js';

let n = 0;
const at = '2026-01-01T00:00:00.000Z';
const created = (job: string, batch = 'b1', tenant = 'acme'): CreatedReport => ({
  kind: 'created',
  id: `c${++n}`,
  job,
  batch,
  tenant,
  queue: 'scans',
  at,
});
const settled = (job: string, outcome: SettledReport['outcome'], more: Partial<SettledReport> = {}): SettledReport => ({
  kind: 'settled',
  id: `r${++n}`,
  job,
  batch: 'b1',
  tenant: 'acme',
  stage: 's',
  queue: 'q',
  outcome,
  attempt: 1,
  at,
  ...more,
});

describe('batch fold', () => {
  it('completes a fan-out once every known job settled, exactly once', () => {
    const fold = new BatchFold();
    expect(fold.apply(created('root')).completed).to.equal(undefined);
    expect(fold.apply(settled('root', 'completed', { emitted: ['a', 'b'] })).completed).to.equal(undefined);
    expect(fold.batch('b1')?.counts).to.include({ known: 3, completed: 1, in_flight: 2 });
    expect(fold.apply(settled('a', 'completed')).completed).to.equal(undefined);
    const done = fold.apply(settled('b', 'dead', { error: { type: 'X', message: 'x' } })).completed;
    expect(done?.counts).to.deep.equal({ known: 3, completed: 2, failed: 1, dead: 1, discarded: 0, cancelled: 0, in_flight: 0 });
    expect(batchState(done!)).to.equal('completed');
  });

  it('ignores an exact duplicate report and counts the children of a re-run', () => {
    const fold = new BatchFold();
    fold.apply(created('root'));
    const report = settled('root', 'completed', { emitted: ['a'] });
    fold.apply(report);
    fold.apply(report);
    expect(fold.batch('b1')?.counts).to.include({ known: 2, completed: 1, in_flight: 1 });
    // A crash after the report: moved to suspect, runs again at attempt 2 and emits another child.
    fold.apply(settled('root', 'suspect', { next_attempt: 2 }));
    expect(fold.batch('b1')?.counts).to.include({ completed: 0, in_flight: 2 });
    fold.apply(settled('a', 'completed'));
    expect(fold.batch('b1')?.counts.in_flight).to.equal(1);
    fold.apply(settled('root', 'completed', { attempt: 2, emitted: ['a2'] }));
    expect(fold.batch('b1')?.counts).to.include({ known: 3, completed: 2, in_flight: 1 });
    expect(fold.apply(settled('a2', 'completed')).completed?.counts).to.include({ known: 3, completed: 3, in_flight: 0 });
  });

  it('keeps a job in flight while a retry is promised, and settles it at the later attempt', () => {
    const fold = new BatchFold();
    fold.apply(created('root'));
    fold.apply(settled('root', 'retrying', { next_attempt: 2 }));
    expect(fold.batch('b1')?.counts.in_flight).to.equal(1);
    // A stale copy of the retry report, read again later, changes nothing.
    const done = fold.apply(settled('root', 'completed', { attempt: 2 }));
    expect(done.completed).to.not.equal(undefined);
    fold.apply(settled('root', 'retrying', { next_attempt: 2 }));
    expect(fold.batch('b1')?.counts).to.include({ completed: 1, in_flight: 0 });
  });

  it('undoes a retracted completed report and forgets children that were never sent', () => {
    const fold = new BatchFold();
    fold.apply(created('root'));
    const optimistic = settled('root', 'completed', { emitted: ['a', 'b'] });
    fold.apply(optimistic);
    fold.apply(settled('root', 'retrying', { next_attempt: 1, retracts: optimistic.id, unsent: ['b'] }));
    expect(fold.batch('b1')?.counts).to.include({ known: 2, completed: 0, in_flight: 2 });
    fold.apply(settled('a', 'completed'));
    const done = fold.apply(settled('root', 'completed', { emitted: ['c'] }));
    expect(done.completed).to.equal(undefined);
    expect(fold.apply(settled('c', 'completed')).completed?.counts).to.include({ known: 3, completed: 3 });
  });

  it('keeps the first final outcome and counts a different later one as a conflict', () => {
    const fold = new BatchFold();
    fold.apply(created('root'));
    fold.apply(settled('root', 'completed'));
    fold.apply(settled('root', 'dead', { attempt: 2 }));
    expect(fold.batch('b1')).to.deep.include({ conflicts: 1 });
    expect(fold.batch('b1')?.counts).to.include({ completed: 1, dead: 0 });
  });

  it("keeps each tenant's batch of one id apart, and refuses a report of another tenant's job id", () => {
    const fold = new BatchFold();
    fold.apply(created('root'));
    expect(fold.apply(created('intruder', 'b1', 'globex')).refused).to.equal(undefined);
    expect(fold.batch('b1', 'acme')).to.deep.include({ refused: 0, tenant: 'acme' });
    expect(fold.batch('b1', 'acme')?.counts.known).to.equal(1);
    expect(fold.batch('b1', 'globex')?.counts.known).to.equal(1);
    expect(fold.batchesNamed('b1').map((batch) => batch.tenant)).to.deep.equal(['acme', 'globex']);
    // globex reusing acme's job id, in a batch of its own: not acme's job.
    expect(fold.apply(created('root', 'b2', 'globex')).refused).to.match(/another tenant's/);
    expect(fold.job('root')).to.deep.include({ tenant: 'acme', batch: 'b1' });
    expect(fold.batch('b2', 'globex')).to.deep.include({ refused: 1 });
    expect(fold.batch('b2', 'globex')?.counts.known).to.equal(0);
  });

  it('keeps a parked job in flight until it runs after the resume, at the same attempt', () => {
    const fold = new BatchFold();
    fold.apply(created('root'));
    fold.apply(directive('pause'));
    expect(fold.batch('b1')?.paused).to.equal(true);
    fold.apply(settled('root', 'parked', { next_attempt: 1 }));
    expect(jobState(fold.job('root')!)).to.equal('parked');
    expect(fold.batch('b1')?.counts).to.include({ known: 1, in_flight: 1 });
    fold.apply(directive('resume'));
    expect(fold.batch('b1')?.paused).to.equal(false);
    expect(fold.apply(settled('root', 'completed')).completed?.counts).to.include({ known: 1, completed: 1, in_flight: 0 });
  });

  it('counts cancelled jobs apart from failures and completes a cancelled batch as cancelled', () => {
    const fold = new BatchFold();
    fold.apply(created('root'));
    fold.apply(settled('root', 'completed', { emitted: ['a', 'b'] }));
    fold.apply(directive('cancel'));
    expect(batchState(fold.batch('b1')!)).to.equal('running');
    fold.apply(settled('a', 'completed'));
    const done = fold.apply(settled('b', 'cancelled', { error: { type: 'CANCELLED', message: 'x' } })).completed;
    expect(done?.counts).to.deep.equal({ known: 3, completed: 2, failed: 0, dead: 0, discarded: 0, cancelled: 1, in_flight: 0 });
    expect(batchState(done!)).to.equal('cancelled');
    // A pause after the cancel changes nothing: there is nothing left to hold.
    fold.apply(directive('pause'));
    expect(fold.batch('b1')?.paused).to.equal(false);
  });
});

function directive(action: DirectiveRecord['action']): DirectiveRecord {
  return { kind: 'directive', id: `d${++n}`, action, batch: 'b1', at };
}
