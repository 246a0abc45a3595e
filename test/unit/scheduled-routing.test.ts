import { expect } from 'chai';
import type { Options } from 'amqplib';
import { JobRouter, routeFor, SCHEDULE_HOP_SLACK_MS, scheduleHopMs, scheduledDelaySeconds } from '../../src/broker/job-router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { RawConfig } from '../../src/config/config.types.js';
import { createJob } from '../../src/job/envelope.js';
import type { Job, JobSpec } from '../../src/job/job.types.js';
import { StageHarness } from '../../src/testing/index.js';
import { delayRoutingKey, MAX_DELAY_SECONDS } from '../../src/topology/delay-topology.js';
import { SchedulerStage } from '../fixtures/failure-stages.js';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const at = (offsetMs: number): string => new Date(NOW + offsetMs).toISOString();
const PDF = 'application/pdf';

const RAW: RawConfig = {
  prefix: 'p',
  queues: {
    shared_q: { scope: 'shared' },
    payments: { allowed_job_types: ['payment.*'] },
    conversions: { variants: { by: 'mime', values: { pdf: [PDF], office: ['application/msword'] } } },
  },
};
const config = compileConfig(RAW);

/** A job for tenant acme, or for `tenant` (null: none). */
function job(queue: string, spec: Partial<JobSpec> = {}, tenant: string | null = 'acme'): Job {
  return createJob({ type: 't', ...spec }, { queue, ...(tenant === null ? {} : { tenant }) });
}

describe('scheduled jobs: routing through the delay ladder', () => {
  it("sends a job due 3 s from now to the ladder, addressed to its physical queue's due companion", () => {
    expect(routeFor(config, job('orders', { scheduled_at: at(3000) }), { now: NOW, headers: {} })).to.deep.equal({
      exchange: 'p.retry',
      routingKey: delayRoutingKey(3000, 'p.due.orders.acme'),
      delaySeconds: 3,
    });
    expect(routeFor(config, job('shared_q', { scheduled_at: at(3000) }, null), { now: NOW, headers: {} })).to.deep.equal({
      exchange: 'p.retry',
      routingKey: delayRoutingKey(3000, 'p.due.shared_q'),
      delaySeconds: 3,
    });
  });

  it('picks the variant queue whose values hold the variant header, else the general queue, as the broker would', () => {
    const scheduled = job('conversions', { scheduled_at: at(60_000) });
    const due = (headers: Record<string, unknown>): string | undefined =>
      /^(?:[01]\.){20}(.+)$/.exec(routeFor(config, scheduled, { now: NOW, headers }).routingKey)?.[1];
    expect(due({ mime: PDF })).to.equal('p.due.conversions.acme.pdf');
    expect(due({ mime: 'application/msword' })).to.equal('p.due.conversions.acme.office');
    expect(due({ mime: 'text/plain' })).to.equal('p.due.conversions.acme');
    expect(due({})).to.equal('p.due.conversions.acme');
    // A headers exchange compares types too: a list holding the value is not the value.
    expect(due({ mime: [PDF] })).to.equal('p.due.conversions.acme');
  });

  it('rounds the wait to whole seconds as the ladder does; a time in the past or under half a second ahead enters at once', () => {
    const entry = { exchange: 'p.root', routingKey: 'orders' };
    for (const offset of [-86_400_000, -1, 0, 499]) {
      expect(routeFor(config, job('orders', { scheduled_at: at(offset) }), { now: NOW, headers: {} }), `${offset} ms`).to.deep.equal(entry);
    }
    expect(routeFor(config, job('orders', { scheduled_at: at(500) }), { now: NOW, headers: {} }).delaySeconds).to.equal(1);
    expect(routeFor(config, job('orders', { scheduled_at: at(1499) }), { now: NOW, headers: {} }).delaySeconds).to.equal(1);
    expect(routeFor(config, job('orders', { scheduled_at: at(2500) }), { now: NOW, headers: {} }).delaySeconds).to.equal(3);
    // Time zones are honoured: the same instant written in +02:00.
    const local = job('orders', { scheduled_at: '2026-03-01T14:00:05+02:00' });
    expect(routeFor(config, local, { now: NOW, headers: {} }).delaySeconds).to.equal(5);
  });

  it('holds a job up to the ladder limit, and one beyond it for the limit (it hops on from its due queue)', () => {
    const limit = routeFor(config, job('orders', { scheduled_at: at(MAX_DELAY_SECONDS * 1000) }), { now: NOW, headers: {} });
    expect(limit.delaySeconds).to.equal(MAX_DELAY_SECONDS);
    expect(limit.routingKey).to.equal(`${'1.'.repeat(20)}p.due.orders.acme`);
    const beyond = routeFor(config, job('orders', { scheduled_at: '2099-12-31T23:59:59Z' }), { now: NOW, headers: {} });
    expect(beyond).to.deep.equal(limit);
    // Out of the ladder: what is left, when more than the slack; a job on time (or early by the ladder's rounding) runs.
    const far = Date.parse('2099-12-31T23:59:59Z');
    expect(scheduleHopMs({ scheduled_at: '2099-12-31T23:59:59Z' }, NOW + MAX_DELAY_SECONDS * 1000)).to.equal(
      far - NOW - MAX_DELAY_SECONDS * 1000,
    );
    expect(scheduleHopMs({ scheduled_at: at(SCHEDULE_HOP_SLACK_MS) }, NOW)).to.equal(undefined);
    expect(scheduleHopMs({ scheduled_at: at(500) }, NOW)).to.equal(undefined);
    expect(scheduleHopMs({}, NOW)).to.equal(undefined);
    expect(() => scheduledDelaySeconds({ type: 't', scheduled_at: 'soon' }, NOW))
      .to.throw(/scheduled_at must be an ISO 8601 timestamp/)
      .with.property('code', 'INVALID_REQUEST');
  });

  it('keeps every check of the entry route: allowed types, a tenant for tenant-scoped queues', () => {
    expect(() => routeFor(config, job('payments', { scheduled_at: at(5000) }), { now: NOW, headers: {} }))
      .to.throw(/not allowed in queue "payments"/)
      .with.property('code', 'JOB_TYPE_NOT_ALLOWED');
    expect(() => routeFor(config, job('orders', { scheduled_at: at(5000) }, null), { now: NOW, headers: {} }))
      .to.throw(/tenant-scoped/)
      .with.property('code', 'TENANT_REQUIRED');
  });

  it('with tenantUsers: a producer schedules into its own tenant only', () => {
    const producer = compileConfig({ ...RAW, broker: { url: 'amqp://p.producer.acme:pw@localhost/' }, security: { tenantUsers: true } });
    expect(routeFor(producer, job('orders', { scheduled_at: at(2000) }), { now: NOW, headers: {} }).routingKey).to.equal(
      delayRoutingKey(2000, 'p.due.orders.acme'),
    );
    expect(() => routeFor(producer, job('orders', { scheduled_at: at(2000) }, 'globex'), { now: NOW, headers: {} }))
      .to.throw(/publishes for tenant "acme" only/)
      .with.property('code', 'TENANT_MISMATCH');
  });

  it('enters at once without a schedule context: dead letters and replays never wait again', () => {
    expect(routeFor(config, job('orders', { scheduled_at: at(60_000) }))).to.deep.equal({ exchange: 'p.root', routingKey: 'orders' });
  });

  it('JobRouter publishes a scheduled job to the ladder without its enqueue_ttl, which would cut the wait short', async () => {
    const sent: Array<{ exchange: string; routingKey: string; options: Options.Publish }> = [];
    const router = new JobRouter(config, {
      publish: (exchange, routingKey, _content, options) => {
        sent.push({ exchange, routingKey, options });
        return Promise.resolve();
      },
    });
    const future = new Date(Date.now() + 30_000).toISOString();
    await router.send(job('conversions', { scheduled_at: future, enqueue_ttl: 'PT10S' }), { headers: { mime: PDF } });
    await router.send(job('conversions', { enqueue_ttl: 'PT10S' }), { headers: { mime: PDF } });
    expect(sent.map((s) => [s.exchange, s.routingKey.replace(/^(?:[01]\.){20}/, '<delay>.')])).to.deep.equal([
      ['p.retry', '<delay>.p.due.conversions.acme.pdf'],
      ['p.root', 'conversions'],
    ]);
    expect(sent[0].options.expiration).to.equal(undefined);
    expect(sent[0].options.headers).to.include({ 'x-ojs-scheduled-at': future });
    expect(sent[1].options.expiration).to.equal('10000');
    // Beyond the ladder's reach: sent for its longest wait (the stage consuming the due queue hops it on).
    await router.send(job('orders', { scheduled_at: new Date(Date.now() + 13 * 86_400_000).toISOString() }));
    expect(sent).to.have.length(3);
    expect(sent[2].routingKey).to.equal(`${'1.'.repeat(20)}p.due.orders.acme`);
  });

  it('StageHarness records an emit within the ladder limit, and one beyond it (it hops on), as a running stage does', async () => {
    const harness = await StageHarness.create(SchedulerStage, { tenant: 'acme' });
    const { emitted } = await harness.run({ type: 'plan', args: ['harness', 60_000] });
    expect(emitted).to.have.length(1);
    const [{ output, job: emittedJob }] = emitted;
    expect([output, emittedJob.tenant]).to.deep.equal(['work', 'acme']);
    expect(Date.parse(emittedJob.scheduled_at ?? '') - Date.now()).to.be.within(50_000, 60_000);
    const far = await harness.run({ type: 'plan', args: ['too-far', (MAX_DELAY_SECONDS + 60) * 1000] });
    expect(far.emitted).to.have.length(1);
  });

  it('createJob refuses a scheduled_at that is not a timestamp with a time zone', () => {
    for (const bad of ['tomorrow', '2026-03-01T12:00:00', '2026-02-30T12:00:00Z']) {
      expect(() => job('orders', { scheduled_at: bad }), bad)
        .to.throw(/"scheduled_at" must be an ISO 8601 timestamp with a time zone/)
        .with.property('code', 'INVALID_PAYLOAD');
    }
  });
});
