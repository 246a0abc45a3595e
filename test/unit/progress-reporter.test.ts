import { expect } from 'chai';
import type { Job } from '../../src/job/job.types.js';
import { foldJob, type JobRow } from '../../src/job-state/job-lifecycle.js';
import { jobStateView } from '../../src/job-state/job-views.js';
import { ProgressReporter } from '../../src/runner/handling/progress-reporter.js';
import { StageHarness } from '../../src/testing/index.js';
import { stamp, type CreatedReport, type ProgressRecord } from '../../src/tracking-stream/tracking-report.js';
import { ConverterStage, convertGate } from '../fixtures/progress-stages.js';

const job = { id: 'j1', type: 'convert.pdf', queue: 'convert', args: [], meta: {}, attempt: 1, tenant: 'acme' } as unknown as Job;
const where = { stage: 'converter', queue: 'convert' };

function progressRecord(attempt: number, progress: number | null, at: string, message?: string): ProgressRecord {
  return {
    ...stamp<ProgressRecord>({
      kind: 'progress',
      job: 'j1',
      tenant: 'acme',
      stage: 'converter',
      queue: 'convert',
      attempt,
      progress,
      ...(message === undefined ? {} : { message }),
    }),
    at,
  };
}

describe('progress of native stages (ctx.progress)', () => {
  it('sends the first report at once, folds a tight loop into one later report, clamps and never goes back', async () => {
    const sent: ProgressRecord[] = [];
    const reporter = new ProgressReporter(job, where, { record: (r) => (sent.push(r), Promise.resolve()) }, 50);
    reporter.report(-3, 'starting');
    for (let i = 0; i < 1000; i++) reporter.report(i / 100);
    reporter.report(0.4);
    expect(sent.map((r) => [r.progress, r.message])).to.deep.equal([[0, 'starting']]);
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(sent.map((r) => [r.progress, r.message])).to.deep.equal([
      [0, 'starting'],
      [1, 'starting'],
    ]);
    expect(sent[1]).to.deep.include({ job: 'j1', tenant: 'acme', stage: 'converter', queue: 'convert', attempt: 1, kind: 'progress' });
  });

  it('drops a waiting report when the job completed, sends it when it failed', async () => {
    const completed: ProgressRecord[] = [];
    const one = new ProgressReporter(job, where, { record: (r) => (completed.push(r), Promise.resolve()) }, 10_000);
    one.report(0.1);
    one.report(0.9);
    one.end(true);
    one.report(0.95);
    expect(completed.map((r) => r.progress)).to.deep.equal([0.1]);
    const failed: ProgressRecord[] = [];
    const two = new ProgressReporter(job, where, { record: (r) => (failed.push(r), Promise.resolve()) }, 10_000);
    two.report(0.1);
    two.report(0.9, 'page 9');
    two.end(false);
    expect(failed.map((r) => [r.progress, r.message])).to.deep.equal([
      [0.1, undefined],
      [0.9, 'page 9'],
    ]);
  });

  it('the job store keeps the highest fraction of the latest attempt in any order, and a completed job shows 1', () => {
    const records = [
      progressRecord(1, 0.6, '2026-01-01T00:00:02Z', 'b'),
      progressRecord(1, 0.3, '2026-01-01T00:00:01Z', 'a'),
      progressRecord(2, 0.1, '2026-01-01T00:00:03Z', 'again'),
    ];
    const fold = (order: ProgressRecord[]): JobRow | undefined =>
      order.reduce<JobRow | undefined>((row, r) => foldJob(row, r, () => undefined), undefined);
    const forward = fold(records);
    expect(fold([...records].reverse())?.progress).to.deep.equal(forward?.progress);
    expect(forward?.progress).to.deep.include({ attempt: 2, value: 0.1, message: 'again' });
    expect(fold(records.slice(0, 2))?.progress).to.deep.include({ value: 0.6, message: 'b' });
    const row = fold(records.slice(0, 2)) as JobRow;
    expect(jobStateView({ ...row, state: 'completed' })).to.deep.include({ progress: 1, progress_message: 'b' });
    expect(jobStateView({ ...row, state: 'retryable' })).to.deep.include({ progress: 0.6 });
  });

  it("ignores a report naming another tenant than the job's", () => {
    const row = foldJob(
      undefined,
      stamp<CreatedReport>({ kind: 'created', job: 'j1', queue: 'convert', tenant: 'globex' }),
      () => undefined,
    );
    expect(foldJob(row, progressRecord(1, 0.5, '2026-01-01T00:00:01Z'), () => undefined).progress).to.equal(undefined);
  });

  it('the stage harness records every progress call', async () => {
    const harness = await StageHarness.create(ConverterStage);
    const running = harness.run({ type: 'convert.pdf', args: ['ok'] });
    await new Promise((resolve) => setImmediate(resolve));
    convertGate.releaseAll();
    const { progress, result } = await running;
    expect(result).to.deep.equal({ pages: 2000 });
    expect(progress).to.have.length(2003);
    expect(progress[0]).to.deep.equal({ fraction: 0.1, message: 'starting' });
    expect(progress.at(-2)).to.deep.equal({ fraction: 0.5, message: 'halfway' });
    expect(progress.at(-1)).to.deep.equal({ fraction: 0.2 });
  });
});
