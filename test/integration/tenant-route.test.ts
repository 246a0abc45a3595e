import path from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { expect } from 'chai';
import { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import { JobRouter } from '../../src/broker/job-router.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createJob } from '../../src/job/envelope.js';
import { createLogger } from '../../src/logging/logger.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { PDF } from '../fixtures/route-stages.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'tenant-route' }, 'error');

/**
 * A stage running for a tenant publishes that tenant's jobs to the tenant's exchange, not
 * through the root headers exchange (one exchange hop less, the costliest one); they land where
 * the root exchange would have sent them. Any other tenant still goes through the root exchange,
 * so that a tenant never provisioned ends in `unroutable` rather than closing the channel.
 */
describe('the route of the jobs a tenant stage emits', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let running: RunningGroup;
  let spy: string;

  before(async () => {
    config = withTestConfig(
      {
        tenants: ['acme'],
        queues: { arrivals: {}, plain: {}, sorted: { variants: { by: 'mime', values: { pdf: [PDF] } } } },
        stages: { forward: { module: './route-stages.js' } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(config, [{ stage: 'forward', tenant: 'acme' }], log);
    // Everything of acme that crosses the root exchange is copied here.
    spy = `${config.prefix}.spy`;
    const connection = await amqplib.connect(config.broker.url);
    try {
      const channel = await connection.createChannel();
      await channel.assertQueue(spy, { durable: false });
      await channel.bindQueue(spy, running.names.root, '', { 'x-match': 'all-with-x', [config.tenantHeader]: 'acme' });
      await channel.close();
    } finally {
      await connection.close();
    }
  });

  after(async () => {
    await running.raw.deleteQueue(spy).catch(() => undefined);
    await running.stop();
  });

  it("sends a stage's jobs of its own tenant to the tenant exchange: same queues, and none crosses the root exchange", async () => {
    const { names, raw, publisher } = running;
    await publisher.publish('arrivals', { type: 'route.me', args: [1], tenant: 'acme' });
    const plain = names.queue('plain', 'acme');
    const pdf = names.queue('sorted', 'acme', 'pdf');
    await waitFor('both emitted jobs in their queues', async () => (await raw.count(plain)) === 1 && (await raw.count(pdf)) === 1, 20_000);
    expect(await raw.counts([names.queue('sorted', 'acme'), names.unroutable])).to.deep.equal({
      [names.queue('sorted', 'acme')]: 0,
      [names.unroutable]: 0,
    });
    // Only the producer's job took the root exchange (a Publisher declares no tenant exchange).
    const crossed = await raw.drain(spy);
    expect(crossed.map((m) => JSON.parse(m.content.toString()).queue)).to.deep.equal(['arrivals']);
  });

  it('keeps a job of another tenant, never provisioned, in unroutable through the root exchange, and the channel stays open', async () => {
    const { names, raw } = running;
    const connection = await amqplib.connect(config.broker.url);
    try {
      const channel = await ConfirmPublisher.open(connection);
      // The router of a stage running for acme.
      const router = new JobRouter(config, channel, undefined, 'acme');
      await router.send(createJob({ type: 'route.me', args: [2] }, { queue: 'plain', tenant: 'initech' }));
      const kept = await raw.drain(names.unroutable);
      expect(kept.map((m) => m.properties.headers?.['x-ojs-tenant'])).to.deep.equal(['initech']);
      expect(channel.isOpen).to.equal(true);
      await router.send(createJob({ type: 'route.me', args: [3] }, { queue: 'plain', tenant: 'acme' }));
      await waitFor("acme's job in its queue", async () => (await raw.count(names.queue('plain', 'acme'))) === 2, 20_000);
      await channel.close();
    } finally {
      await connection.close();
    }
  });
});
