import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import { formatQueues } from '../../src/inspect/format-queues.js';
import { buildLimitReports } from '../../src/inspect/limit-report.js';
import { buildQueueReports, type QueueReport } from '../../src/inspect/queue-report.js';
import type { BrokerQueueStats } from '../../src/broker-management/management-client.js';

/**
 * A queue's own flow limits as `stagecoach queues` (and the dashboard, and `GET
 * /ojs/v1/queues/{name}`) show them: from the configuration (the tenant's own first), with the
 * jobs running under them read from the same statistics as the queues' (`<prefix>.flow.*`).
 */
describe('inspection: a queue’s flow limits', () => {
  const config = compileConfig({
    prefix: 'ojs',
    tenants: ['acme', { name: 'globex', queues: { conv: { concurrency: 2 } } }],
    queues: {
      conv: { concurrency: 5, rate_limit: { limit: 20, period: 'PT1S' } },
      slow: { rate_limit: { limit: 10, period: 'PT10S' } },
      free: {},
    },
  });
  const queue = (name: string, ready = 0, unacked = 0): BrokerQueueStats => ({
    name,
    messages_ready: ready,
    messages_unacknowledged: unacked,
    consumers: 1,
  });
  // acme's conv partition on the broker: 5 tokens, 3 held (running); a rate bucket of the 1 s
  // window (cooldown 1010 ms) with 4 starts cooling down and 1 spent right now; and a stale bucket
  // of an older 2 s window (cooldown 2020 ms) nobody takes any more.
  const acme = 'ojs.flow.queue:ojs.queue.conv.acme';
  const stats: BrokerQueueStats[] = [
    queue('ojs.queue.conv.acme', 7, 3),
    queue('ojs.queue.conv.globex'),
    queue('ojs.queue.slow.acme'),
    queue('ojs.queue.free.acme'),
    queue(`${acme}.concurrency`, 2, 3),
    queue(`${acme}.concurrency.ledger`, 5),
    queue(`${acme}.concurrency.lock`),
    queue(`${acme}.rate.2020`, 7, 0),
    queue(`${acme}.rate.2020.ledger`, 7),
    queue(`${acme}.rate.2020.cooldown`, 0),
    queue(`${acme}.rate.1010`, 15, 1),
    queue(`${acme}.rate.1010.ledger`, 20),
    queue(`${acme}.rate.1010.cooldown`, 4),
  ];
  const byName = (reports: QueueReport[], name: string): QueueReport => reports.find((r) => r.name === name) as QueueReport;

  it('reports the limits in force on each physical queue, the tenant’s own first, and the jobs running under them', () => {
    const reports = buildQueueReports(config, stats, []);
    expect(byName(reports, 'ojs.queue.conv.acme').limits).to.deep.equal({
      key: 'queue:ojs.queue.conv.acme',
      concurrency: 5,
      rate_limit: { limit: 20, period: 'PT1S', period_ms: 1000 },
      active: 3,
      current_count: 5,
    });
    // globex's own concurrency, the queue's rate; no job has needed a token yet: nothing known running.
    expect(byName(reports, 'ojs.queue.conv.globex').limits).to.deep.equal({
      key: 'queue:ojs.queue.conv.globex',
      concurrency: 2,
      rate_limit: { limit: 20, period: 'PT1S', period_ms: 1000 },
      active: null,
      current_count: null,
    });
    expect(byName(reports, 'ojs.queue.slow.acme').limits).to.include({ concurrency: null, active: null });
    expect(byName(reports, 'ojs.queue.free.acme').limits).to.equal(null);
    // The flow queues are not work queues.
    expect(reports.map((r) => r.name)).to.deep.equal([
      'ojs.queue.conv.acme',
      'ojs.queue.conv.globex',
      'ojs.queue.free.acme',
      'ojs.queue.slow.acme',
    ]);
  });

  it('prints them in one compact LIMITS column', () => {
    const lines = formatQueues(buildQueueReports(config, stats, [])).split('\n');
    expect(lines[0]).to.match(/\bDEAD\s+LIMITS$/);
    const cell = (queue: string): string => (lines.find((line) => line.startsWith(queue)) as string).split(/\s{2,}/).at(-1) as string;
    expect(lines.filter((line) => line.startsWith('conv')).map((line) => line.split(/\s{2,}/).at(-1))).to.deep.equal([
      '3/5 run 20/s',
      '-/2 run 20/s',
    ]);
    expect(cell('slow')).to.equal('10/PT10S');
    expect(cell('free')).to.equal('-');
  });

  it('prints a page of the table, saying how to see the rest; every row with --limit 0', () => {
    const reports = buildQueueReports(config, stats, []);
    const rowsOf = (text: string): string[] => text.split('\n').filter((line) => /^(conv|free|slow)\s/.test(line));
    const page = formatQueues(reports, { offset: 1, limit: 2 });
    expect(rowsOf(page).map((line) => line.split(/\s+/).slice(0, 2).join(' '))).to.deep.equal(['conv globex', 'free acme']);
    expect(page).to.contain('queues 2-3 of 4: --offset 3 for the next, --limit 0 for all');
    expect(rowsOf(formatQueues(reports, { limit: 0 }))).to.have.length(4);
    expect(formatQueues(reports, { limit: 0 })).not.to.contain('for the next');
    expect(formatQueues(reports, { offset: 9 })).to.contain('queues none of 4');
  });

  it('counts a queue partition against its configured limit and window, not a stale window’s bucket', () => {
    const [report] = buildLimitReports(config, stats, 'queue:ojs.queue.conv.acme');
    expect(report).to.deep.equal({
      key: 'queue:ojs.queue.conv.acme',
      configured: true,
      concurrency: { limit: 5, tokens: 5, active: 3, available: 2 },
      rate: { limit: 20, tokens: 20, period_ms: 1000, current_count: 5 },
    });
  });
});
