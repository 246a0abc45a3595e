import { expect } from 'chai';
import { register as globalRegister } from 'prom-client';
import type { Logger } from '../../src/logging/logger.js';
import { StageMetrics, type QueueDepthSample } from '../../src/observability/stage-metrics.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (the subset prom-client writes) into samples. */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The samples of `name` whose labels include `labels`. */
function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The one sample of `name` with exactly these labels; fails if there is none or several. */
function value(samples: Sample[], name: string, labels: Record<string, string>): number {
  const found = samples.filter(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === Object.keys(labels).length &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  expect(found, `${name}${JSON.stringify(labels)}`).to.have.length(1);
  return found[0]!.value;
}

function recordingLogger(): { log: Logger; lines: { level: string; message: string; meta: unknown }[] } {
  const lines: { level: string; message: string; meta: unknown }[] = [];
  const at = (level: string) => (message: string, meta?: unknown) => {
    lines.push({ level, message, meta });
  };
  const log = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') } as unknown as Logger;
  return { log, lines };
}

const ACME = { stage: 'converter', queue: 'conversions', tenant: 'acme' };
const GLOBEX = { stage: 'converter', queue: 'conversions', tenant: 'globex' };
const SHARED = { stage: 'explorer', queue: 'scan-specs', tenant: '' };

describe('StageMetrics', () => {
  it('counts job events under the stage, queue and tenant labels', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false });
    const acme = metrics.instance(ACME);
    const globex = metrics.instance(GLOBEX);
    const shared = metrics.instance({ stage: 'explorer', queue: 'scan-specs' });

    for (let i = 0; i < 3; i++) acme.consumed();
    acme.completed(0.01);
    acme.completed(0.02);
    acme.failed(0.5, 'HANDLER_ERROR');
    acme.retried();
    acme.deadLettered();
    acme.discarded();
    acme.published('representations');
    acme.published('representations');
    acme.published('problems');
    acme.acked();
    acme.acked();
    globex.consumed();
    shared.consumed();
    shared.failed(0.1, 'TypeError');
    shared.failed(0.1, 'TypeError');

    const s = parse(await metrics.text());
    expect(value(s, 'stagecoach_jobs_consumed_total', ACME)).to.equal(3);
    expect(value(s, 'stagecoach_jobs_consumed_total', GLOBEX)).to.equal(1);
    expect(value(s, 'stagecoach_jobs_consumed_total', SHARED)).to.equal(1);
    expect(value(s, 'stagecoach_jobs_completed_total', ACME)).to.equal(2);
    expect(value(s, 'stagecoach_jobs_failed_total', { ...ACME, error_type: 'HANDLER_ERROR' })).to.equal(1);
    expect(value(s, 'stagecoach_jobs_failed_total', { ...SHARED, error_type: 'TypeError' })).to.equal(2);
    expect(value(s, 'stagecoach_jobs_retried_total', ACME)).to.equal(1);
    expect(value(s, 'stagecoach_jobs_dead_lettered_total', ACME)).to.equal(1);
    expect(value(s, 'stagecoach_jobs_discarded_total', ACME)).to.equal(1);
    expect(value(s, 'stagecoach_jobs_published_total', { ...ACME, output: 'representations' })).to.equal(2);
    expect(value(s, 'stagecoach_jobs_published_total', { ...ACME, output: 'problems' })).to.equal(1);
    expect(value(s, 'stagecoach_acks_total', ACME)).to.equal(2);
    // Untouched series of a known instance exist at 0, so that rate() sees the first event.
    expect(value(s, 'stagecoach_jobs_completed_total', GLOBEX)).to.equal(0);
    expect(value(s, 'stagecoach_jobs_retried_total', SHARED)).to.equal(0);
  });

  it('starts the published series of declared outputs at 0', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false });
    metrics.instance({ ...ACME, outputs: ['representations', 'problems'] });
    const s = parse(await metrics.text());
    expect(value(s, 'stagecoach_jobs_published_total', { ...ACME, output: 'representations' })).to.equal(0);
    expect(value(s, 'stagecoach_jobs_published_total', { ...ACME, output: 'problems' })).to.equal(0);
  });

  it('observes handler durations in the histogram, by outcome', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false });
    const m = metrics.instance(ACME);
    m.completed(0.003);
    m.completed(2);
    m.failed(400, 'HANDLER_TIMEOUT');
    m.completed(Number.NaN); // counted, not observed, and does not throw
    m.failed(-1, 'HANDLER_ERROR');

    const s = parse(await metrics.text());
    const completed = { ...ACME, outcome: 'completed' };
    const failed = { ...ACME, outcome: 'failed' };
    const bucket = (labels: Record<string, string>, le: string) =>
      value(s, 'stagecoach_handler_duration_seconds_bucket', { ...labels, le });
    expect(bucket(completed, '0.001')).to.equal(0);
    expect(bucket(completed, '0.005')).to.equal(1);
    expect(bucket(completed, '2.5')).to.equal(2);
    expect(bucket(completed, '300')).to.equal(2);
    expect(value(s, 'stagecoach_handler_duration_seconds_count', completed)).to.equal(2);
    expect(value(s, 'stagecoach_handler_duration_seconds_sum', completed)).to.be.closeTo(2.003, 1e-9);
    expect(bucket(failed, '300')).to.equal(0);
    expect(bucket(failed, '+Inf')).to.equal(1);
    expect(value(s, 'stagecoach_handler_duration_seconds_count', failed)).to.equal(1);
    expect(value(s, 'stagecoach_jobs_completed_total', ACME)).to.equal(3);
    // Buckets cover 1 ms .. 5 min.
    const les = find(s, 'stagecoach_handler_duration_seconds_bucket', completed).map((x) => x.labels.le);
    expect(les[0]).to.equal('0.001');
    expect(les).to.include.members(['300', '+Inf']);
  });

  it('reads the queue depth from its source at scrape time, and only then', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false });
    let calls = 0;
    let depths: QueueDepthSample[] = [
      { ...ACME, physicalQueue: 'ojs.queue.conversions.acme', depth: 7 },
      { ...ACME, physicalQueue: 'ojs.queue.conversions.acme.pdf', depth: 2 },
      { stage: 'explorer', queue: 'scan-specs', physicalQueue: 'ojs.queue.scan-specs', depth: 0 },
    ];
    metrics.setQueueDepthSource(async () => {
      calls++;
      return depths;
    });
    expect(calls).to.equal(0);

    let s = parse(await metrics.text());
    expect(calls).to.equal(1);
    expect(value(s, 'stagecoach_queue_depth', { ...ACME, physical_queue: 'ojs.queue.conversions.acme' })).to.equal(7);
    expect(value(s, 'stagecoach_queue_depth', { ...ACME, physical_queue: 'ojs.queue.conversions.acme.pdf' })).to.equal(2);
    expect(value(s, 'stagecoach_queue_depth', { ...SHARED, physical_queue: 'ojs.queue.scan-specs' })).to.equal(0);

    depths = [{ ...ACME, physicalQueue: 'ojs.queue.conversions.acme', depth: 3 }];
    s = parse(await metrics.text());
    expect(calls).to.equal(2);
    expect(value(s, 'stagecoach_queue_depth', { ...ACME, physical_queue: 'ojs.queue.conversions.acme' })).to.equal(3);
    // A queue the source no longer reports is gone, not stale.
    expect(find(s, 'stagecoach_queue_depth')).to.have.length(1);

    metrics.setQueueDepthSource(undefined);
    s = parse(await metrics.text());
    expect(find(s, 'stagecoach_queue_depth')).to.have.length(0);
  });

  for (const [what, source] of [
    [
      'throws',
      (): QueueDepthSample[] => {
        throw new Error('management API down');
      },
    ],
    ['rejects', (): Promise<QueueDepthSample[]> => Promise.reject(new Error('management API down'))],
  ] as const) {
    it(`still answers a scrape when the queue-depth source ${what}`, async () => {
      const { log, lines } = recordingLogger();
      const metrics = new StageMetrics({ log });
      metrics.instance(ACME).consumed();
      let failing = true;
      metrics.setQueueDepthSource(() => (failing ? source() : [{ ...ACME, physicalQueue: 'q', depth: 1 }]));

      const s = parse(await metrics.text());
      expect(value(s, 'stagecoach_jobs_consumed_total', ACME)).to.equal(1);
      expect(find(s, 'stagecoach_queue_depth')).to.have.length(0);
      expect(find(s, 'process_cpu_user_seconds_total')).to.have.length(1);
      expect(lines.filter((l) => l.level === 'warn')).to.have.length(1);
      expect(JSON.stringify(lines[0]!.meta)).to.contain('management API down');

      // Repeated failures are not repeated warnings; recovery is reported once.
      await metrics.text();
      expect(lines.filter((l) => l.level === 'warn')).to.have.length(1);
      failing = false;
      expect(value(parse(await metrics.text()), 'stagecoach_queue_depth', { ...ACME, physical_queue: 'q' })).to.equal(1);
      expect(lines.filter((l) => l.level === 'info')).to.have.length(1);
    });
  }

  it('does not let a hanging queue-depth source hang the scrape', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false, queueDepthTimeoutMs: 50 });
    metrics.setQueueDepthSource(() => new Promise<never>(() => {}));
    metrics.instance(ACME).consumed();
    const s = parse(await metrics.text());
    expect(value(s, 'stagecoach_jobs_consumed_total', ACME)).to.equal(1);
    expect(find(s, 'stagecoach_queue_depth')).to.have.length(0);
  });

  it('memoises instances and binds label children once, not per event', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false });
    const m = metrics.instance({ stage: 'explorer', queue: 'scan-specs' });
    expect(metrics.instance({ stage: 'explorer', queue: 'scan-specs', tenant: '' })).to.equal(m);
    expect(metrics.instance({ stage: 'explorer', queue: 'scan-specs', tenant: null })).to.equal(m);
    expect(metrics.instance(ACME)).to.not.equal(m);
    // The \0 separator keeps label sets apart that plain concatenation would merge.
    expect(metrics.instance({ stage: 'a', queue: 'b.c', tenant: '' })).to.not.equal(
      metrics.instance({ stage: 'a.b', queue: 'c', tenant: '' }),
    );

    m.failed(0.1, 'HANDLER_ERROR');
    m.published('conversions');
    let labelsCalls = 0;
    for (const metric of metrics.registry.getMetricsAsArray()) {
      const original = (metric as unknown as { labels: (...args: unknown[]) => unknown }).labels.bind(metric);
      (metric as unknown as { labels: (...args: unknown[]) => unknown }).labels = (...args: unknown[]) => {
        labelsCalls++;
        return original(...args);
      };
    }
    for (let i = 0; i < 1000; i++) {
      m.consumed();
      m.completed(0.001);
      m.failed(0.1, 'HANDLER_ERROR');
      m.retried();
      m.deadLettered();
      m.discarded();
      m.published('conversions');
      m.acked();
    }
    expect(labelsCalls).to.equal(0);
    m.failed(0.1, 'TypeError'); // a new error type binds one new child
    m.failed(0.1, 'TypeError');
    expect(labelsCalls).to.equal(1);

    const s = parse(await metrics.text());
    expect(value(s, 'stagecoach_jobs_consumed_total', SHARED)).to.equal(1000);
    expect(value(s, 'stagecoach_jobs_failed_total', { ...SHARED, error_type: 'HANDLER_ERROR' })).to.equal(1001);
    expect(value(s, 'stagecoach_jobs_published_total', { ...SHARED, output: 'conversions' })).to.equal(1001);
  });

  it('caps the distinct error types, counting the rest as "other"', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false, maxErrorTypes: 2 });
    const m = metrics.instance(ACME);
    for (const type of ['A', 'B', 'C', 'D', 'A', '']) m.failed(0.1, type);
    const s = parse(await metrics.text());
    expect(value(s, 'stagecoach_jobs_failed_total', { ...ACME, error_type: 'A' })).to.equal(2);
    expect(value(s, 'stagecoach_jobs_failed_total', { ...ACME, error_type: 'B' })).to.equal(1);
    expect(value(s, 'stagecoach_jobs_failed_total', { ...ACME, error_type: 'other' })).to.equal(3);
    expect(find(s, 'stagecoach_jobs_failed_total')).to.have.length(3);
  });

  it('keeps the tenant label bounded: tenants beyond maxTenantSeries are summed under _other, in job metrics, runner gauges and queue gauges', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false, maxTenantSeries: 3 });
    const tenants = Array.from({ length: 10 }, (_, i) => `t${i}`);
    const instances = tenants.map((tenant) => metrics.instance({ stage: 'ocr', queue: 'scans', tenant }));
    instances.forEach((instance) => instance.consumed());
    metrics.instance({ stage: 'ocr', queue: 'shared', tenant: '' }).consumed();
    metrics.setRunnerSource(() => tenants.map((tenant, i) => ({ stage: 'ocr', queue: 'scans', tenant, consuming: i !== 7, inFlight: 2 })));
    metrics.setQueueDepthSource(() =>
      tenants.map((tenant) => ({
        stage: 'ocr',
        queue: 'scans',
        tenant,
        physicalQueue: `ojs.queue.scans.${tenant}`,
        depth: 5,
        maxSize: 10,
      })),
    );
    metrics.queueOverflow({ queue: 'scans', tenant: 't9', physicalQueue: 'ojs.queue.scans.t9', policy: 'reject' });
    const samples = parse(await metrics.text());
    const consumed = find(samples, 'stagecoach_jobs_consumed_total');
    expect(consumed.map((s) => [s.labels.tenant, s.value])).to.have.deep.members([
      ['t0', 1],
      ['t1', 1],
      ['t2', 1],
      ['_other', 7],
      ['', 1],
    ]);
    expect(find(samples, 'stagecoach_jobs_in_flight', { tenant: '_other' }).map((s) => s.value)).to.deep.equal([14]);
    // t7 does not consume: neither do the others together.
    expect(find(samples, 'stagecoach_consuming', { tenant: '_other' }).map((s) => s.value)).to.deep.equal([0]);
    expect(find(samples, 'stagecoach_consuming', { tenant: 't1' }).map((s) => s.value)).to.deep.equal([1]);
    const depth = find(samples, 'stagecoach_queue_depth');
    expect(depth.map((s) => [s.labels.tenant, s.labels.physical_queue, s.value])).to.have.deep.members([
      ['t0', 'ojs.queue.scans.t0', 5],
      ['t1', 'ojs.queue.scans.t1', 5],
      ['t2', 'ojs.queue.scans.t2', 5],
      ['_other', '_other', 35],
    ]);
    expect(find(samples, 'stagecoach_queue_utilization', { tenant: '_other' }).map((s) => s.value)).to.deep.equal([0.5]);
    expect(find(samples, 'stagecoach_queue_overflow_total').map((s) => [s.labels.tenant, s.labels.physical_queue])).to.deep.equal([
      ['_other', '_other'],
    ]);
    // What a pooled group reads the depths of: the tenants with their own label, and shared queues.
    expect(tenants.filter((tenant) => metrics.labelsOwn(tenant))).to.deep.equal(['t0', 't1', 't2']);
    expect(metrics.labelsOwn('')).to.equal(true);
  });

  it('reports the connection state and counts reconnects', async () => {
    const metrics = new StageMetrics({ defaultMetrics: false });
    let s = parse(await metrics.text());
    expect(value(s, 'stagecoach_connection_up', {})).to.equal(0);
    expect(value(s, 'stagecoach_reconnects_total', {})).to.equal(0);
    metrics.setConnected(true);
    metrics.reconnected();
    metrics.reconnected();
    s = parse(await metrics.text());
    expect(value(s, 'stagecoach_connection_up', {})).to.equal(1);
    expect(value(s, 'stagecoach_reconnects_total', {})).to.equal(2);
    metrics.setConnected(false);
    expect(value(parse(await metrics.text()), 'stagecoach_connection_up', {})).to.equal(0);
  });

  it('keeps its own registry, with the default Node.js metrics, away from the global one', async () => {
    const a = new StageMetrics();
    const b = new StageMetrics();
    a.instance(ACME).consumed();
    expect(find(parse(await b.text()), 'stagecoach_jobs_consumed_total')).to.have.length(0);
    expect(globalRegister.getSingleMetric('stagecoach_jobs_consumed_total')).to.equal(undefined);
    const text = await a.text();
    expect(text).to.contain('# TYPE stagecoach_jobs_consumed_total counter');
    expect(text).to.contain('# HELP stagecoach_jobs_consumed_total ');
    expect(find(parse(text), 'process_cpu_user_seconds_total')).to.have.length(1);
    expect(find(parse(text), 'nodejs_eventloop_lag_seconds')).to.have.length(1);
    expect(a.contentType).to.match(/^text\/plain; version=0\.0\.4/);
  });
});
