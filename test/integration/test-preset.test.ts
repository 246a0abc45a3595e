import amqplib from 'amqplib';
import { expect } from 'chai';
import { flagName } from '../../src/flags/flag.js';
import { vhostOfAmqpUrl } from '../../src/security/broker-users.js';
import { managementClientOf } from '../../src/broker-management/management-client.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { brokerNamesOf } from '../../src/topology/names.js';

describe('the test preset (broker)', function () {
  this.timeout(30_000);

  it('teardown deletes what a run made up under its prefix, and nothing of a prefix that merely starts like it', async () => {
    const config = withTestConfig({ tenants: ['acme'], queues: { work: { scope: 'tenant' } } });
    const names = brokerNamesOf(config);
    // No topology of the configuration names these: a tenant added while running, a batch, a flow partition.
    const madeUp = {
      queues: [names.suspectQueue('work', 'initech'), `${config.prefix}.flow.tenant.initech`],
      exchange: flagName(config.prefix, { kind: 'batch-cancelled', batch: 'b-1' }),
    };
    const neighbour = `${config.prefix}x.queue.work`;
    const api = managementClientOf(config);
    const vhost = vhostOfAmqpUrl(config.broker.url);
    const connection = await amqplib.connect(config.broker.url);
    try {
      const channel = await connection.createChannel();
      for (const queue of [...madeUp.queues, neighbour]) await channel.assertQueue(queue, { durable: false });
      await channel.assertExchange(madeUp.exchange, 'fanout', { durable: false });
      await channel.close();

      await teardown(config);

      const left = [...(await api.listQueues(vhost)).map((queue) => queue.name), ...(await api.listExchangeNames(vhost))].filter((name) =>
        name.startsWith(config.prefix),
      );
      expect(left, 'names left under the prefix').to.deep.equal([neighbour]);
    } finally {
      const channel = await connection.createChannel();
      await channel.deleteQueue(neighbour);
      await connection.close();
    }
  });
});
