import { expect } from 'chai';
import { refusedQueue } from '../../src/broker/refusal-cause.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { QueueFullError } from '../../src/errors/errors.js';
import type { EventPublisher } from '../../src/events/event-publisher.js';
import { JobEvents } from '../../src/events/job-events.js';
import { createEvent } from '../../src/events/ojs-event.js';
import { createJob } from '../../src/job/envelope.js';
import { QueueFullReporter, QueueFullThrottle, type QueueFullSighting } from '../../src/events/queue-full-reporter.js';
import { createLogger } from '../../src/logging/logger.js';
import { maxSizeOf, policyOf } from '../../src/observability/queue-size-bounds.js';
import { StageMetrics } from '../../src/observability/stage-metrics.js';
import { delayRoutingKey } from '../../src/topology/delay-topology.js';
import { queuePolicies } from '../../src/topology/queue-policies.js';
import type { BrokerPolicy } from '../../src/broker-management/management-client.js';
import { toBrokerPolicy } from '../../src/plan/queue-settings.js';

const config = compileConfig({
  prefix: 'p',
  tenants: ['acme', { name: 'globex', queues: { conversions: { max_size: 9 } } }],
  queues: {
    shared_q: { scope: 'shared', max_size: 3 },
    conversions: { max_size: 5, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
  },
});
const STAGES = [{ name: 'converter', input: 'conversions', outputs: ['shared_q'] }];

describe('events', () => {
  it('makes CloudEvents-shaped envelopes with a UUIDv7 id and the time of making', () => {
    const now = Date.parse('2026-11-23T20:00:00.000Z');
    const event = createEvent('queue.full', 'stagecoach/converter', 'conversions', { tenant: 'acme' }, now);
    expect(event).to.deep.include({
      specversion: '1.0',
      type: 'queue.full',
      source: 'stagecoach/converter',
      time: '2026-11-23T20:00:00.000Z',
      subject: 'conversions',
      datacontenttype: 'application/json',
      data: { tenant: 'acme' },
    });
    expect(event.id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/);
    expect(createEvent('tenant.retired', 's', undefined, {})).not.to.have.property('subject');
  });

  describe('refusedQueue', () => {
    const refusal = (exchange: string, routingKey: string, tenant?: string, headers: Record<string, unknown> = {}): QueueFullError =>
      new QueueFullError(exchange, routingKey, { queue: 'conversions', ...(tenant === undefined ? {} : { tenant }), headers });

    it('names the physical queue the broker routed to: general or variant queue, shared queue, by tenant exchange too', () => {
      expect(refusedQueue(config, refusal('p.root', 'conversions', 'acme'))).to.equal('p.queue.conversions.acme');
      expect(refusedQueue(config, refusal('p.root', 'conversions', 'acme', { mime: 'application/pdf' }))).to.equal(
        'p.queue.conversions.acme.pdf',
      );
      expect(refusedQueue(config, refusal('p.tenant.acme', 'conversions', 'acme'))).to.equal('p.queue.conversions.acme');
      expect(refusedQueue(config, refusal('p.direct', 'shared_q'))).to.equal('p.queue.shared_q');
    });

    it('reads the queue from a delay-ladder or a dead-letter key, and gives up on a route that names none', () => {
      expect(refusedQueue(config, refusal('p.retry', delayRoutingKey(5000, 'p.due.conversions.acme')))).to.equal('p.due.conversions.acme');
      expect(refusedQueue(config, refusal('p.dlx', 'p.dead.conversions.acme'))).to.equal('p.dead.conversions.acme');
      expect(refusedQueue(config, refusal('p.root', 'conversions'))).to.equal(undefined);
      expect(refusedQueue(config, refusal('elsewhere', 'conversions', 'acme'))).to.equal(undefined);
    });
  });

  describe('QueueFullThrottle', () => {
    it('lets the first refusal of a queue through, then one per interval, counting the refusals in between', () => {
      let now = 0;
      const throttle = new QueueFullThrottle(10_000, () => now);
      expect(throttle.admit('q1')).to.equal(1);
      now = 5_000;
      expect(throttle.admit('q1')).to.equal(undefined);
      expect(throttle.admit('q1')).to.equal(undefined);
      expect(throttle.admit('q2'), 'another queue is not held back').to.equal(1);
      now = 10_000;
      expect(throttle.admit('q1'), 'this one and the two held back').to.equal(3);
      now = 19_999;
      expect(throttle.admit('q1')).to.equal(undefined);
    });
  });

  describe('QueueFullReporter', () => {
    it('tells every refusal to onRefused and publishes queue.full as the throttle allows', () => {
      const published: Array<{ type: string; subject: string | undefined; data: Record<string, unknown> }> = [];
      const events = {
        publish: (type: string, subject: string | undefined, data: Record<string, unknown>) => {
          published.push({ type, subject, data });
          return Promise.resolve(undefined);
        },
      } as unknown as EventPublisher;
      const sightings: QueueFullSighting[] = [];
      const reporter = new QueueFullReporter(config, events, {
        onRefused: (s) => sightings.push(s),
        throttle: new QueueFullThrottle(10_000, () => 0),
      });
      const refusal = new QueueFullError('p.root', 'conversions', { queue: 'conversions', tenant: 'acme' });
      reporter.observe(refusal);
      reporter.observe(refusal);
      expect(sightings).to.deep.equal([
        { queue: 'conversions', tenant: 'acme', physicalQueue: 'p.queue.conversions.acme', policy: 'reject' },
        { queue: 'conversions', tenant: 'acme', physicalQueue: 'p.queue.conversions.acme', policy: 'reject' },
      ]);
      expect(published).to.deep.equal([
        {
          type: 'queue.full',
          subject: 'conversions',
          data: {
            queue: 'conversions',
            tenant: 'acme',
            physical_queue: 'p.queue.conversions.acme',
            policy: 'reject',
            exchange: 'p.root',
            routing_key: 'conversions',
            refusals: 1,
          },
        },
      ]);
    });
  });

  describe('queue bounds from the policies in force', () => {
    const policies: BrokerPolicy[] = queuePolicies(config, STAGES).map(toBrokerPolicy);

    it("picks the matching policy of highest priority: a tenant's own bound over its queue's", () => {
      expect(maxSizeOf(policyOf(policies, 'p.queue.conversions.acme'))).to.equal(5);
      expect(maxSizeOf(policyOf(policies, 'p.queue.conversions.acme.pdf'))).to.equal(5);
      expect(maxSizeOf(policyOf(policies, 'p.queue.conversions.globex'))).to.equal(9);
      expect(maxSizeOf(policyOf(policies, 'p.queue.shared_q'))).to.equal(3);
    });

    it('finds no bound for an unbounded queue, a companion queue or a policy that applies to exchanges', () => {
      expect(maxSizeOf(policyOf(policies, 'p.due.conversions.acme'))).to.equal(undefined);
      expect(maxSizeOf(policyOf(policies, 'p.queue.other.acme'))).to.equal(undefined);
      const exchangesOnly: BrokerPolicy = {
        name: 'x',
        pattern: '.*',
        'apply-to': 'exchanges',
        priority: 999,
        definition: { 'max-length': 1 },
      };
      expect(maxSizeOf(policyOf([exchangesOnly], 'p.queue.other.acme'))).to.equal(undefined);
    });
  });

  describe('capacity metrics', () => {
    it('reports max size and utilization beside the depth from one reading, and none for an unlimited queue', async () => {
      const metrics = new StageMetrics({ defaultMetrics: false, log: createLogger({}, 'error') });
      let calls = 0;
      metrics.setQueueDepthSource(() => {
        calls++;
        return [
          { stage: 'converter', queue: 'conversions', tenant: 'acme', physicalQueue: 'p.queue.conversions.acme', depth: 3, maxSize: 4 },
          { stage: 'converter', queue: 'conversions', tenant: 'globex', physicalQueue: 'p.queue.conversions.globex', depth: 7 },
        ];
      });
      metrics.queueOverflow({ queue: 'out', tenant: 'acme', physicalQueue: 'p.queue.out.acme', policy: 'reject' });
      const text = await metrics.text();
      expect(calls, 'one reading per scrape').to.equal(1);
      const acme = '{stage="converter",queue="conversions",tenant="acme",physical_queue="p.queue.conversions.acme"}';
      expect(text).to.contain(`stagecoach_queue_depth${acme} 3\n`);
      expect(text).to.contain(`stagecoach_queue_max_size${acme} 4\n`);
      expect(text).to.contain(`stagecoach_queue_utilization${acme} 0.75\n`);
      expect(text).to.contain('stagecoach_queue_depth{stage="converter",queue="conversions",tenant="globex"');
      expect(text).not.to.contain('stagecoach_queue_max_size{stage="converter",queue="conversions",tenant="globex"');
      expect(text).not.to.contain('stagecoach_queue_utilization{stage="converter",queue="conversions",tenant="globex"');
      expect(text).to.contain(
        'stagecoach_queue_overflow_total{queue="out",tenant="acme",physical_queue="p.queue.out.acme",policy="reject"} 1\n',
      );
      await metrics.text();
      expect(calls, 'the next scrape reads again').to.equal(2);
    });
  });

  describe('job events (queues.<q>.events)', () => {
    const events = compileConfig({
      tenants: [
        'acme',
        { name: 'globex', queues: { orders: { events: false } } },
        { name: 'initech', queues: { _default: { events: true } } },
      ],
      queues: { _default: {}, orders: { events: true }, quiet: {}, loud_shared: { scope: 'shared', events: true } },
    });
    const sent: Array<{ type: string; subject: string | undefined; data: Record<string, unknown> }> = [];
    const sink = (type: string, subject: string | undefined, data: Record<string, unknown>): void =>
      void sent.push({ type, subject, data });
    const at = (queue: string, tenant?: string): JobEvents | undefined => JobEvents.of(events, { queue, tenant, stage: 's' }, sink);

    it('are off by default, on where a queue, its _default or a tenant of it turns them on, and off without a sink', () => {
      expect(at('quiet', 'acme')).to.equal(undefined);
      expect(at('orders', 'acme')).to.be.instanceOf(JobEvents);
      expect(at('orders', 'globex'), "the tenant's own setting wins").to.equal(undefined);
      expect(at('quiet', 'initech'), "the tenant's _default").to.be.instanceOf(JobEvents);
      expect(at('loud_shared')).to.be.instanceOf(JobEvents);
      expect(JobEvents.of(events, { queue: 'orders', tenant: 'acme', stage: 's' }, undefined)).to.equal(undefined);
      expect(compileConfig({}).defaultQueue.events).to.equal(false);
    });

    it('carry the OJS event data, the job id as subject', () => {
      sent.length = 0;
      const job = createJob({ type: 'order.ship', meta: { batch: 'b-1' } }, { queue: 'orders', tenant: 'acme' });
      const on = at('orders', 'acme') as JobEvents;
      on.completed(job, 1.2345);
      on.failed(job, { type: 'SmtpError', message: 'refused', backtrace: ['at a', 'at b'] }, true);
      on.discarded(job, { type: 'SmtpError', message: 'refused' }, 'dead_letter');
      on.cancelled(job);
      const base = { job_type: 'order.ship', queue: 'orders', tenant: 'acme', stage: 's' };
      expect(sent).to.deep.equal([
        { type: 'job.completed', subject: job.id, data: { ...base, duration_ms: 1235, attempt: 1 } },
        {
          type: 'job.failed',
          subject: job.id,
          data: { ...base, attempt: 1, error: { code: 'SmtpError', message: 'refused', retryable: true, stack_trace: 'at a\nat b' } },
        },
        {
          type: 'job.discarded',
          subject: job.id,
          data: { ...base, total_attempts: 1, last_error: { code: 'SmtpError', message: 'refused' }, route: 'dead_letter' },
        },
        {
          type: 'job.cancelled',
          subject: job.id,
          data: { ...base, cancelled_by: 'batch', reason: 'batch "b-1" was cancelled', batch: 'b-1' },
        },
      ]);
    });
  });
});
