import { expect } from 'chai';
import { routeFor } from '../../src/broker/job-router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { RawConfig } from '../../src/config/config.types.js';
import { createJob } from '../../src/job/envelope.js';
import { decideFailure } from '../../src/retry/failure-decision.js';
import { resolveRetryPolicy } from '../../src/retry/retry-policy.js';
import { BrokerIdentities, userOfAmqpUrl, vhostOfAmqpUrl } from '../../src/security/broker-users.js';
import { redactUrl } from '../../src/broker-management/management-client.js';
import { internalUserGrant, tenantUserGrant } from '../../src/security/permissions.js';
import { PublisherCheck } from '../../src/security/publisher-check.js';
import { TenantMismatchError } from '../../src/errors/errors.js';
import { delayRoutingKey } from '../../src/topology/delay-topology.js';
import { BrokerNames } from '../../src/topology/names.js';

const raw = (user: string, extra: RawConfig = {}): RawConfig => ({
  prefix: 'p',
  broker: { url: `amqp://${user}:pw@localhost:5672/` },
  security: { tenantUsers: true },
  queues: { shared_q: { scope: 'shared' } },
  ...extra,
});
const as = (user: string): ReturnType<typeof compileConfig> => compileConfig(raw(user));
const names = new BrokerNames('p');

/** Whether a RabbitMQ permission (a PCRE, '' = nothing) grants `resource`: JavaScript's regex agrees on these patterns. */
function grants(pattern: string, resource: string): boolean {
  return pattern !== '' && new RegExp(pattern).test(resource);
}

describe('tenant users (security.tenantUsers)', () => {
  describe('identities', () => {
    it('reads the user and virtual host of an AMQP URL as amqplib does', () => {
      expect(userOfAmqpUrl('amqp://p.stage.acme:x@h/')).to.equal('p.stage.acme');
      expect(userOfAmqpUrl('amqp://h:5672/')).to.equal('guest');
      expect(userOfAmqpUrl('amqp://a%40b:x@h/')).to.equal('a@b');
      expect(vhostOfAmqpUrl('amqp://h:5672/')).to.equal('/');
      expect(vhostOfAmqpUrl('amqp://h:5672')).to.equal('/');
      expect(vhostOfAmqpUrl('amqp://h:5672/%2Fprod')).to.equal('/prod');
      expect(redactUrl('http://guest:secret@h:15672/')).to.equal('http://guest:***@h:15672/');
    });

    it("knows the process's own user, its tenant, and whom to trust", () => {
      const producer = new BrokerIdentities(as('p.producer.acme'));
      expect([producer.self, producer.selfTenant, producer.selfTrusted]).to.deep.equal(['p.producer.acme', 'acme', false]);
      const internal = new BrokerIdentities(as('p.internal'));
      expect([internal.selfTenant, internal.selfTrusted]).to.deep.equal([undefined, true]);
      const operator = new BrokerIdentities(as('guest'));
      expect([operator.selfTenant, operator.selfTrusted]).to.deep.equal([undefined, true]);
      expect(producer.tenantOf('q.producer.acme')).to.equal(undefined, 'another prefix');
    });

    it("lets a job for tenant T come from T's producer or stage user, the internal user or the operator only", () => {
      const ids = new BrokerIdentities(as('p.internal'));
      for (const user of ['p.producer.acme', 'p.stage.acme', 'p.internal', 'guest'])
        expect(ids.mayActFor('acme', user), user).to.equal(true);
      for (const user of ['p.producer.globex', 'p.stage.globex', 'p.producer.acm', 'p.producer.xacme', 'q.producer.acme', 'p.other.acme']) {
        expect(ids.mayActFor('acme', user), user).to.equal(false);
      }
      expect(ids.mayActFor('acme', undefined), 'no user_id').to.equal(false);
      expect(ids.mayActFor(undefined, 'p.producer.acme'), 'a tenant user, no tenant').to.equal(false);
      expect(ids.mayActFor(undefined, 'p.internal')).to.equal(true);
    });

    it('checks a tenant queue by its own tenant and a shared queue by the claimed one, as TENANT_MISMATCH', () => {
      const ids = new BrokerIdentities(as('p.stage.acme'));
      const own = new PublisherCheck(ids, 'acme');
      expect(own.refusal('globex', 'p.producer.acme')).to.equal(undefined, "the queue's tenant decides");
      expect(own.refusal('acme', 'p.producer.globex')).to.be.instanceOf(TenantMismatchError).with.property('code', 'TENANT_MISMATCH');
      const shared = new PublisherCheck(ids, undefined);
      expect(shared.refusal('acme', 'p.producer.acme')).to.equal(undefined);
      const refused = shared.refusal('globex', 'p.producer.acme');
      expect(refused?.message).to.contain('tenant "globex"').and.contain('"p.producer.acme"');
      expect(shared.refusal('globex', undefined)?.message).to.contain('no validated user_id');
    });

    it('never retries a TENANT_MISMATCH', () => {
      const policy = resolveRetryPolicy(compileConfig({}).defaultQueue, undefined);
      const error = new TenantMismatchError('globex', 'p.producer.acme', 'no');
      expect(decideFailure(policy, 1, { type: 'TENANT_MISMATCH' }, error)).to.deep.equal({ kind: 'dead-lettered', exhausted: false });
    });
  });

  describe('routing', () => {
    const job = (queue: string, tenant?: string) => createJob({ type: 't' }, { queue, ...(tenant === undefined ? {} : { tenant }) });

    it("sends a tenant user's tenant-scoped jobs straight to its tenant's exchange, never the root", () => {
      expect(routeFor(as('p.producer.acme'), job('conversions', 'acme'))).to.deep.equal({
        exchange: 'p.tenant.acme',
        routingKey: 'conversions',
      });
      expect(routeFor(as('p.stage.acme'), job('shared_q', 'acme'))).to.deep.equal({ exchange: 'p.direct', routingKey: 'shared_q' });
    });

    it('keeps the root exchange for trusted users, and for everyone without tenantUsers', () => {
      expect(routeFor(as('p.internal'), job('conversions', 'globex')).exchange).to.equal('p.root');
      expect(routeFor(as('guest'), job('conversions', 'globex')).exchange).to.equal('p.root');
      const off = compileConfig({ ...raw('p.producer.acme'), security: { tenantUsers: false } });
      expect(routeFor(off, job('conversions', 'globex')).exchange).to.equal('p.root');
    });

    it("refuses a tenant user's job for another tenant, or for none, before the broker would", () => {
      for (const [queue, tenant] of [
        ['conversions', 'globex'],
        ['shared_q', 'globex'],
        ['shared_q', undefined],
      ] as const) {
        expect(() => routeFor(as('p.producer.acme'), job(queue, tenant)), `${queue} ${tenant}`)
          .to.throw(TenantMismatchError)
          .with.property('code', 'TENANT_MISMATCH');
      }
    });
  });

  describe('permissions', () => {
    const config = as('guest');
    const producer = tenantUserGrant(config, 'producer', 'acme');
    const stage = tenantUserGrant(config, 'stage', 'acme');
    const internal = internalUserGrant(config);

    it('names the users <prefix>.producer.<tenant>, <prefix>.stage.<tenant> and <prefix>.internal', () => {
      expect([producer.user, stage.user, internal.user]).to.deep.equal(['p.producer.acme', 'p.stage.acme', 'p.internal']);
    });

    it("lets a producer write only its tenant's exchange, the shared entry and the delay ladder, and nothing else", () => {
      expect(producer.permissions.configure).to.equal('');
      expect(producer.permissions.read).to.equal('');
      const writable = ['p.tenant.acme', 'p.direct', 'p.retry', 'p.events'];
      const refused = [
        'p.tenant.globex',
        'p.root',
        'amq.default',
        'p.dlx',
        'p.tenant.acme2',
        'xp.tenant.acme',
        'p.tenant.acme.x',
        'p.retry2',
      ];
      for (const name of writable) expect(grants(producer.permissions.write, name), name).to.equal(true);
      for (const name of refused) expect(grants(producer.permissions.write, name), name).to.equal(false);
    });

    it("lets a producer schedule only into its own tenant's due queues and shared due queues (retry topic permission)", () => {
      const [retry, events] = producer.topics;
      expect(producer.topics).to.have.length(2);
      expect(events).to.deep.equal({ exchange: 'p.events', write: '^queue\\.full$', read: '' });
      expect(retry.exchange).to.equal('p.retry');
      const allowed = [
        names.dueQueue('conversions', 'acme'),
        names.dueQueue('conversions', 'acme', 'pdf'),
        names.dueQueue('implicit_q', 'acme'),
        names.dueQueue('shared_q'),
      ];
      const refused = [
        names.dueQueue('conversions', 'globex'),
        names.dueQueue('conversions', 'globex', 'pdf'),
        names.dueQueue('conversions', 'acme2'),
        names.suspectQueue('conversions', 'acme'),
        names.suspectQueue('shared_q'),
        names.queue('conversions', 'acme'),
        names.queue('shared_q'),
        names.deadQueue('conversions', 'acme'),
        'q.due.conversions.acme',
      ];
      for (const queue of allowed) expect(grants(retry.write, delayRoutingKey(5000, queue)), queue).to.equal(true);
      for (const queue of refused) expect(grants(retry.write, delayRoutingKey(5000, queue)), queue).to.equal(false);
      expect(grants(retry.write, `#.${names.dueQueue('conversions', 'acme')}`)).to.equal(false, 'not a ladder key');
      expect(grants(retry.write, delayRoutingKey(5000, `${names.dueQueue('conversions', 'acme', 'pdf')}.x`))).to.equal(
        false,
        'a segment more',
      );
    });

    it("lets a stage read only its tenant's main, due and suspect queues (variants included) and control", () => {
      const readable = [
        names.queue('conversions', 'acme'),
        names.queue('conversions', 'acme', 'pdf'),
        names.dueQueue('conversions', 'acme', 'pdf'),
        names.suspectQueue('implicit_q', 'acme'),
        names.control,
        'amq.gen-Xy1',
      ];
      const refused = [
        names.queue('conversions', 'globex'),
        names.queue('conversions', 'globex', 'acme'),
        names.queue('acme'),
        names.queue('shared_q'),
        names.deadQueue('conversions', 'acme'),
        names.unroutable,
        names.queue('conversions', 'acme2'),
        'q.queue.conversions.acme',
      ];
      for (const name of readable) expect(grants(stage.permissions.read, name), name).to.equal(true);
      for (const name of refused) expect(grants(stage.permissions.read, name), name).to.equal(false);
      expect(grants(stage.permissions.configure, names.queue('conversions', 'acme'))).to.equal(false);
      expect(grants(stage.permissions.configure, 'amq.gen-Xy1')).to.equal(true);
    });

    it("lets a stage write its tenant's exchange, direct, retry and dlx, with retry keys ending in its own due or suspect queues", () => {
      for (const name of ['p.tenant.acme', 'p.direct', 'p.retry', 'p.dlx', 'p.events'])
        expect(grants(stage.permissions.write, name), name).to.equal(true);
      for (const name of ['p.tenant.globex', 'p.root', 'amq.default', 'p.delay.deliver', 'p.control']) {
        expect(grants(stage.permissions.write, name), name).to.equal(false);
      }
      const [retry] = stage.topics;
      expect(retry.exchange).to.equal('p.retry');
      expect(grants(retry.write, delayRoutingKey(0, names.dueQueue('conversions', 'acme')))).to.equal(true);
      expect(grants(retry.write, delayRoutingKey(3_600_000, names.suspectQueue('conversions', 'acme', 'pdf')))).to.equal(true);
      expect(grants(retry.write, delayRoutingKey(0, names.dueQueue('conversions', 'globex')))).to.equal(false);
      expect(grants(retry.write, delayRoutingKey(0, names.queue('conversions', 'acme')))).to.equal(false, 'main queue');
      expect(grants(retry.write, delayRoutingKey(0, names.dueQueue('shared_q')))).to.equal(true, 'a scheduled emit to a shared queue');
      expect(grants(retry.write, delayRoutingKey(0, names.suspectQueue('shared_q')))).to.equal(false);
      expect(grants(retry.write, `#.${names.dueQueue('conversions', 'acme')}`)).to.equal(false);
      // The job.* events of the jobs it settles (queues with `events` on), besides queue.full; no administration event.
      const events = stage.topics.find((topic) => topic.exchange === 'p.events');
      for (const type of ['queue.full', 'job.completed', 'job.failed', 'job.discarded', 'job.cancelled'])
        expect(grants(events?.write ?? '', type), type).to.equal(true);
      for (const type of ['tenant.retired', 'queue.deleted', 'job.completed.x'])
        expect(grants(events?.write ?? '', type), type).to.equal(false);
      expect(grants(internal.topics[1]?.write ?? '', 'job.failed')).to.equal(true);
    });

    it('lets the internal user read shared queues only, and write the root exchange for any tenant', () => {
      for (const name of [names.queue('shared_q'), names.dueQueue('shared_q'), names.suspectQueue('shared_q'), names.control]) {
        expect(grants(internal.permissions.read, name), name).to.equal(true);
      }
      for (const name of [names.queue('conversions', 'acme'), names.deadQueue('shared_q'), names.unroutable]) {
        expect(grants(internal.permissions.read, name), name).to.equal(false);
      }
      for (const name of ['p.root', 'p.direct', 'p.retry', 'p.dlx']) expect(grants(internal.permissions.write, name), name).to.equal(true);
      expect(grants(internal.topics[0].write, delayRoutingKey(0, names.dueQueue('shared_q')))).to.equal(true);
      // A scheduled emit goes where the root exchange would have sent it: any tenant's due queue.
      expect(grants(internal.topics[0].write, delayRoutingKey(0, names.dueQueue('conversions', 'acme')))).to.equal(true);
      expect(grants(internal.topics[0].write, delayRoutingKey(0, names.dueQueue('conversions', 'acme', 'pdf')))).to.equal(true);
      for (const queue of [names.suspectQueue('conversions', 'acme'), names.queue('conversions', 'acme'), names.deadQueue('shared_q')]) {
        expect(grants(internal.topics[0].write, delayRoutingKey(0, queue)), queue).to.equal(false);
      }
    });
  });
});
