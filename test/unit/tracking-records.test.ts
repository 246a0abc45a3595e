import { expect } from 'chai';
import type { PublishChannel } from '../../src/broker/confirm-publisher.js';
import { BatchFold } from '../../src/batch/batch-fold.js';
import { parseRecord, parseRecords, type SettledReport, type TrackingRecord } from '../../src/tracking-stream/tracking-report.js';
import { compact, publishGroup, ReportGroup, type SettlementPlace } from '../../src/tracking-stream/tracking-stream.js';
import { createJob } from '../../src/job/envelope.js';
import type { Job } from '../../src/job/job.types.js';

const place: SettlementPlace = { stage: 'reader', queue: 'files', tenant: 'acme' };
const job = (more: { batch?: string; type?: string; attempt?: number; tenant?: string } = {}): Job => {
  const made = createJob(
    { type: more.type ?? 'file.read', args: [] },
    { queue: 'files', tenant: more.tenant ?? 'acme', batch: more.batch ?? 'b1' },
  );
  if (more.attempt !== undefined) made.attempt = more.attempt;
  return made;
};

/** What a publish of the group puts on the stream. */
function published(group: ReportGroup): { content: Buffer; type: unknown; messageId: unknown } {
  const sent: Array<{ content: Buffer; type: unknown; messageId: unknown }> = [];
  const publisher: PublishChannel = {
    publish: (_exchange, _key, content, options) => {
      sent.push({ content, type: options.type, messageId: options.messageId });
      return Promise.resolve();
    },
  };
  void publishGroup(publisher, 'p.tracking', group);
  expect(sent).to.have.length(1);
  return sent[0]!;
}

describe('tracking records (the stream format)', () => {
  it('a group of reports is one compact message that reads back as the reports themselves, in order', () => {
    const group = new ReportGroup();
    const jobs = Array.from({ length: 10 }, () => job());
    const reports = jobs.map((j, i) => group.add(j, 'b1', place, 'completed', { emitted: [`child-${i}`, `child-${i}b`] }));
    expect(reports.map((r) => r.id)).to.deep.equal(jobs.map((_, i) => `${group.id}:${i}`));
    expect(reports.every((r) => r.at >= group.at)).to.equal(true);
    const message = published(group);
    expect(message.type).to.equal('tracking.settled-group');
    expect(message.messageId).to.equal(group.id);
    expect(parseRecords(message.content)).to.deep.equal(reports);
    // Shared fields are written once; each report carries its job and its children only (and its
    // time when the clock moved on since the group's first report).
    const body = JSON.parse(message.content.toString('utf8')) as { common: object; reports: object[] };
    expect(body.common).to.deep.equal({
      batch: 'b1',
      tenant: 'acme',
      stage: 'reader',
      queue: 'files',
      type: 'file.read',
      outcome: 'completed',
      attempt: 1,
    });
    const { at, ...own } = body.reports[1] as { at?: string };
    expect(own).to.deep.equal({ job: jobs[1]!.id, emitted: ['child-1', 'child-1b'] });
    expect(at ?? group.at).to.equal(reports[1]!.at);
    const oneByOne = reports.reduce((bytes, report) => bytes + JSON.stringify(report).length, 0);
    expect(message.content.length, 'well under the reports one by one').to.be.below(oneByOne / 2);
  });

  it('a report that joins a group later has its own later time, and keeps it on the stream', () => {
    const group = new ReportGroup();
    const first = group.add(job(), 'b1', place, 'completed', { emitted: [] });
    // A turn that lasts: the clock moves on before the next report joins (bounded wait).
    const moved = Date.now() + 2;
    while (Date.now() < moved);
    const later = group.add(job(), 'b1', place, 'completed', { emitted: [] });
    expect(first.at >= group.at).to.equal(true);
    expect(later.at > group.at, `${later.at} after ${group.at}`).to.equal(true);
    expect(Date.parse(later.at)).to.be.at.least(moved);
    expect(parseRecords(published(group).content)).to.deep.equal([first, later]);
  });

  it('fields that differ between the reports of a group stay with each report', () => {
    const group = new ReportGroup();
    const reports = [
      group.add(job({ type: 'a', attempt: 2 }), 'b1', place, 'completed', { emitted: [] }),
      group.add(job({ type: 'b', batch: 'b2', tenant: 'globex' }), 'b2', { ...place, tenant: undefined }, 'completed', { emitted: ['x'] }),
    ];
    const body = compact(group);
    expect(body.common).to.deep.equal({ stage: 'reader', queue: 'files', outcome: 'completed' });
    expect(body.reports[0]).to.deep.include({ batch: 'b1', type: 'a', attempt: 2, tenant: 'acme' });
    expect(parseRecords(published(group).content)).to.deep.equal(reports);
  });

  it('a group of one is published as the record itself', () => {
    const group = new ReportGroup();
    const report = group.add(job(), 'b1', place, 'completed', { emitted: ['x'] });
    const message = published(group);
    expect(message.type).to.equal('tracking.settled');
    expect(parseRecord(message.content)).to.deep.equal(report);
    expect(parseRecords(message.content)).to.deep.equal([report]);
  });

  it('still reads the JSON arrays of earlier versions, and skips what is not a record', () => {
    const records: TrackingRecord[] = [
      { kind: 'settled', id: 'r1', job: 'j1', batch: 'b1', stage: 's', queue: 'q', outcome: 'completed', attempt: 1, at: 'x' },
      { kind: 'directive', id: 'd1', action: 'cancel', batch: 'b1', at: 'x' },
    ];
    expect(parseRecords(Buffer.from(JSON.stringify([...records, { kind: 'nonsense', id: 'n' }, 7])))).to.deep.equal(records);
    const group = {
      kind: 'settled-group',
      id: 'g',
      at: 'x',
      common: { batch: 'b1', stage: 's', queue: 'q', outcome: 'dead' },
      reports: [
        { job: 'j1', attempt: 3 },
        'not an object',
        { job: 'j2' }, // no attempt: not a settled record
        { job: 'j3', attempt: 1, id: 'own', at: 'y', kind: 'created' },
      ],
    };
    expect(parseRecords(Buffer.from(JSON.stringify(group)))).to.deep.equal([
      { kind: 'settled', id: 'g:0', at: 'x', batch: 'b1', stage: 's', queue: 'q', outcome: 'dead', job: 'j1', attempt: 3 },
      { kind: 'settled', id: 'own', at: 'y', batch: 'b1', stage: 's', queue: 'q', outcome: 'dead', job: 'j3', attempt: 1 },
    ]);
    expect(parseRecords(Buffer.from('{"kind":"settled-group","id":"g","at":"x","common":null,"reports":[]}'))).to.deep.equal([]);
  });

  it('a derived report id is what a retraction names, and a group read twice counts once', () => {
    const group = new ReportGroup();
    const parent = job();
    const completed = group.add(parent, 'b1', place, 'completed', { emitted: ['child'] });
    group.add(job(), 'b1', place, 'completed', { emitted: [] });
    const content = published(group).content;
    const fold = new BatchFold();
    for (const record of [...parseRecords(content), ...parseRecords(content)]) fold.apply(record);
    expect(fold.batch('b1')?.counts).to.include({ known: 3, completed: 2, in_flight: 1 });
    const retry: SettledReport = {
      ...completed,
      id: 'retry-1',
      outcome: 'retrying',
      next_attempt: 1,
      retracts: completed.id,
      unsent: ['child'],
    };
    delete retry.emitted;
    fold.apply(parseRecords(Buffer.from(JSON.stringify(retry)))[0]!);
    expect(fold.job(parent.id)?.cls).to.equal('in_flight');
    expect(fold.batch('b1')?.counts).to.include({ known: 2, completed: 1, in_flight: 1 });
  });
});
