import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import { pipelineOrder } from '../../src/dashboard/pipeline-order.js';
import { limitList } from '../../src/dashboard/limit-list.js';
import { buildMatrix } from '../../src/dashboard/tenant-matrix.js';
import type { LimitReport } from '../../src/inspect/limit-report.js';
import type { QueueLimits } from '../../src/inspect/queue-flow-limits.js';
import type { QueueReport } from '../../src/inspect/queue-report.js';
import type { QueueState } from '../../src/queue-state/queue-state.js';

/** The example pipeline's shape (config/pipeline.json and stages/). */
const STAGES = [
  { name: 'explorer', input: 'scan-specs', outputs: ['conversions'] },
  { name: 'converter', input: 'conversions', outputs: ['representations'] },
  { name: 'matcher', input: 'representations', outputs: ['matches'] },
  { name: 'exporter', input: 'matches', outputs: [] },
];

const config = compileConfig({
  prefix: 'p',
  tenants: ['acme', 'globex'],
  queues: {
    'scan-specs': { scope: 'shared' },
    conversions: { variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
    representations: {},
    matches: { scope: 'shared' },
  },
});

function report(queue: string, tenant: string | undefined, fields: Partial<QueueReport> = {}, variant?: string): QueueReport {
  const companion = (kind: string, ready = 0) => ({ name: `p.${kind}.${queue}`, exists: true, ready, unacked: 0 });
  return {
    name: ['p.queue', queue, tenant, variant].filter(Boolean).join('.'),
    queue,
    scope: tenant === undefined ? 'shared' : 'tenant',
    ...(tenant === undefined ? {} : { tenant }),
    ...(variant === undefined ? {} : { variant }),
    state: 'active' as QueueState,
    drained: false,
    ready: 0,
    unacked: 0,
    consumers: 1,
    publish_rate: 0,
    deliver_rate: 0,
    max_size: null,
    max_size_source: null,
    configured_max_size: null,
    max_size_use: null,
    due: companion('due'),
    suspect: companion('suspect'),
    dead: companion('dead'),
    limits: null,
    ...fields,
  };
}

describe('dashboard matrix', () => {
  it('orders the queues as jobs flow through the stages, shared queues apart', () => {
    // Stages listed out of order: the graph decides, not the listing.
    const order = pipelineOrder(config, [...STAGES].reverse());
    expect(order.tenant.map((q) => q.queue)).to.deep.equal(['conversions', 'representations']);
    expect(order.shared.map((q) => q.queue)).to.deep.equal(['scan-specs', 'matches']);
    expect(order.tenant[0]).to.include({ scope: 'tenant', configured: true });
    expect(order.tenant[0].variants).to.deep.equal(['pdf']);
    expect(order.tenant[0].read_by).to.deep.equal(['converter']);
    expect(order.tenant[0].written_by).to.deep.equal(['explorer']);
  });

  it('keeps queues on a cycle, unused configured queues and queues found only on the broker', () => {
    const cyclic = compileConfig({ queues: { a: {}, b: {}, idle: {} } });
    const order = pipelineOrder(
      cyclic,
      [
        { name: 'one', input: 'a', outputs: ['b'] },
        { name: 'two', input: 'b', outputs: ['a'] },
      ],
      new Map([['leftover', 'shared' as const]]),
    );
    expect(order.tenant.map((q) => q.queue)).to.deep.equal(['a', 'b', 'idle']);
    expect(order.shared.map((q) => q.queue)).to.deep.equal(['leftover']);
  });

  it('sums a tenant cell over the general and variant queues, and counts dead letters once', () => {
    const reports = [
      report('conversions', 'acme', {
        ready: 5,
        unacked: 2,
        consumers: 1,
        deliver_rate: 1.5,
        dead: { name: 'd', exists: true, ready: 4, unacked: 0 },
      }),
      report(
        'conversions',
        'acme',
        { ready: 3, unacked: null, consumers: 2, state: 'paused', dead: { name: 'd', exists: true, ready: 4, unacked: 0 } },
        'pdf',
      ),
      report('representations', 'acme', { ready: 900, max_size: 1000, max_size_use: 0.9 }),
      report('scan-specs', undefined, { ready: 7 }),
    ];
    const matrix = buildMatrix(config, STAGES, reports, 2);
    expect(matrix.columns.map((c) => c.queue)).to.deep.equal(['conversions', 'representations']);
    const acme = matrix.rows.find((row) => row.tenant === 'acme');
    expect(acme?.cells.conversions).to.include({ state: 'active', ready: 8, unacked: 2, consumers: 3, deliver_rate: 1.5, dead: 4 });
    expect(acme?.cells.conversions?.variants).to.deep.equal([
      { variant: 'pdf', state: 'paused', ready: 3, unacked: null, consumers: 2, limits: null },
    ]);
    expect(acme?.cells.representations?.max_size_use).to.equal(0.9);
    expect(acme?.totals).to.deep.equal({ ready: 908, unacked: 2, dead: 4 });
    // A configured tenant with nothing on the broker: a row of missing cells, not a hidden tenant.
    expect(matrix.rows.find((row) => row.tenant === 'globex')?.cells).to.deep.equal({ conversions: null, representations: null });
    expect(matrix.shared.find((c) => c.queue === 'scan-specs')?.cell?.ready).to.equal(7);
    expect(matrix.shared.find((c) => c.queue === 'matches')?.cell).to.equal(null);
    expect(matrix.totals).to.deep.equal({ ready: 915, unacked: 2, dead: 4, consumers: 5 });
    expect(matrix.unroutable).to.equal(2);
  });

  it('pages, filters and sorts 1,000 tenants', () => {
    const tenants = Array.from({ length: 1000 }, (_, i) => `t${String(i).padStart(4, '0')}`);
    const many = compileConfig({ tenants, queues: { work: {} } });
    const stages = [{ name: 's', input: 'work', outputs: [] }];
    const reports = tenants.map((tenant, i) =>
      report('work', tenant, {
        ready: i,
        ...(i % 100 === 7 ? { dead: { name: 'd', exists: true, ready: 1, unacked: 0 } } : {}),
        ...(tenant === 't0500' ? { state: 'paused' as QueueState } : {}),
      }),
    );

    const first = buildMatrix(many, stages, reports, 0);
    expect(first.tenants).to.include({ total: 1000, matched: 1000, offset: 0, limit: 50 });
    expect(first.rows.map((r) => r.tenant)).to.deep.equal(tenants.slice(0, 50));

    const page = buildMatrix(many, stages, reports, 0, { offset: 950, limit: 100 });
    expect(page.tenants).to.include({ offset: 900, limit: 100 }); // past the end: the last page
    expect(page.rows).to.have.length(100);

    const filtered = buildMatrix(many, stages, reports, 0, { filter: 'T099' });
    expect(filtered.rows.map((r) => r.tenant)).to.deep.equal(tenants.slice(990, 1000));
    expect(filtered.tenants.matched).to.equal(10);

    const backlog = buildMatrix(many, stages, reports, 0, { sort: 'backlog', limit: 3 });
    expect(backlog.rows.map((r) => r.tenant)).to.deep.equal(['t0999', 't0998', 't0997']);

    const problems = buildMatrix(many, stages, reports, 0, { problems: true, sort: 'dead', limit: 500 });
    expect(problems.tenants.matched).to.equal(11);
    expect(problems.rows.slice(0, 10).every((r) => r.totals.dead === 1)).to.equal(true);
    expect(problems.rows.map((r) => r.tenant)).to.include('t0500');
  });

  it("shows a cell's own flow limits (a variant queue's apart: its own partition), and lists the named partitions", () => {
    const limits = (physical: string, active: number | null): QueueLimits => ({
      key: `queue:${physical}`,
      concurrency: 5,
      rate_limit: null,
      active,
      current_count: null,
    });
    const matrix = buildMatrix(
      config,
      STAGES,
      [
        report('conversions', 'acme', { limits: limits('p.queue.conversions.acme', 3) }),
        report('conversions', 'acme', { limits: limits('p.queue.conversions.acme.pdf', 1) }, 'pdf'),
        report('representations', 'acme'),
      ],
      null,
    );
    const acme = matrix.rows.find((row) => row.tenant === 'acme');
    expect(acme?.cells.conversions?.limits).to.deep.equal(limits('p.queue.conversions.acme', 3));
    expect(acme?.cells.conversions?.variants[0].limits).to.deep.equal(limits('p.queue.conversions.acme.pdf', 1));
    expect(acme?.cells.representations?.limits).to.equal(null);

    const partition = (key: string): LimitReport => ({
      key,
      configured: true,
      concurrency: { limit: 2, tokens: 2, active: 1, available: 1 },
    });
    const list = limitList([partition('ocr'), partition('ocr@acme'), partition('queue:p.queue.conversions.acme'), partition('zeta')], 2);
    expect(list).to.deep.equal({ items: [partition('ocr'), partition('ocr@acme')], total: 3 });
  });
});
