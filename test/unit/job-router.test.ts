import { expect } from 'chai';
import { routeFor, typeAllowed } from '../../src/broker/job-router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { createJob } from '../../src/job/envelope.js';

describe('job routing decisions', () => {
  const config = compileConfig({
    prefix: 'p',
    queues: { shared_q: { scope: 'shared' }, payments: { allowed_job_types: ['payment.*', 'refund'] } },
  });

  it('sends tenant-scoped jobs to the root exchange and shared ones to direct, keyed by logical queue', () => {
    expect(routeFor(config, createJob({ type: 'payment.card' }, { queue: 'payments', tenant: 'acme' }))).to.deep.equal({
      exchange: 'p.root',
      routingKey: 'payments',
    });
    expect(routeFor(config, createJob({ type: 't' }, { queue: 'shared_q' }))).to.deep.equal({
      exchange: 'p.direct',
      routingKey: 'shared_q',
    });
  });

  it("sends its own tenant's jobs to the tenant exchange, any other tenant's and shared ones as before", () => {
    const job = (tenant?: string, queue = 'payments') =>
      createJob({ type: 'refund' }, { queue, ...(tenant === undefined ? {} : { tenant }) });
    expect(routeFor(config, job('acme'), undefined, 'acme')).to.deep.equal({ exchange: 'p.tenant.acme', routingKey: 'payments' });
    // Another tenant may not be provisioned: the root exchange keeps its job in unroutable.
    expect(routeFor(config, job('globex'), undefined, 'acme')).to.deep.equal({ exchange: 'p.root', routingKey: 'payments' });
    expect(routeFor(config, job(undefined, 'shared_q'), undefined, 'acme')).to.deep.equal({ exchange: 'p.direct', routingKey: 'shared_q' });
  });

  it('refuses a tenant-scoped job without a tenant', () => {
    expect(() => routeFor(config, createJob({ type: 't' }, { queue: 'implicit' })))
      .to.throw(/tenant-scoped/)
      .with.property('code', 'TENANT_REQUIRED');
  });

  it('enforces allowed_job_types with exact names and prefix wildcards', () => {
    expect(() => routeFor(config, createJob({ type: 'refund' }, { queue: 'payments', tenant: 'a' }))).not.to.throw();
    expect(() => routeFor(config, createJob({ type: 'email.send' }, { queue: 'payments', tenant: 'a' })))
      .to.throw(/"email.send" is not allowed in queue "payments"/)
      .with.property('code', 'JOB_TYPE_NOT_ALLOWED');
    expect(typeAllowed(['*'], 'anything')).to.equal(true);
    expect(typeAllowed(['payment.*'], 'payment')).to.equal(false);
    expect(typeAllowed(['payment.*'], 'payment.card.visa')).to.equal(true);
  });
});
