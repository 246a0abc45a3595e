import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { ConfigError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { provisionBroker } from '../../src/plan/provision-broker.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';

const log = createLogger({ test: 'management-url' }, 'error');

/** A management API of another broker: it names another cluster, and holds nothing of ours. */
async function otherBroker(): Promise<{ server: Server; url: string; calls: string[] }> {
  const calls: string[] = [];
  const server = createServer((req, res) => {
    calls.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(req.url === '/api/cluster-name' ? JSON.stringify({ name: 'rabbit@some-other-cluster' }) : '[]');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://guest:guest@127.0.0.1:${(server.address() as AddressInfo).port}/`, calls };
}

describe('broker.management and the broker the process connects to', function () {
  this.timeout(30_000);
  let raw: RawBroker;

  before(async () => {
    raw = await RawBroker.connect(AMQP_URL);
  });

  after(async () => {
    await raw.close();
  });

  it('provision refuses a management API of another cluster (ConfigError on broker.management) and declares nothing', async () => {
    const other = await otherBroker();
    const config = withTestConfig({ tenants: ['acme'], broker: { management: other.url } });
    try {
      let error: unknown;
      try {
        await provisionBroker(config, [], log);
      } catch (err) {
        error = err;
      }
      expect(error).to.be.instanceOf(ConfigError);
      expect((error as ConfigError).key).to.equal('broker.management');
      expect((error as ConfigError).message).to.contain('rabbit@some-other-cluster');
      expect((error as ConfigError).message).not.to.contain('guest:guest');
      // Nothing was read from it as if it were ours, and nothing was declared.
      expect(other.calls).to.deep.equal(['GET /api/cluster-name']);
      expect(await raw.exchangeExists(new BrokerNames(config.prefix).root)).to.equal(false);
    } finally {
      await new Promise((resolve) => other.server.close(resolve));
      await teardown(config);
    }
  });

  it('provision with no broker.management reads and changes the broker of the AMQP URL, found from it', async () => {
    const config = withTestConfig({ tenants: ['acme'], broker: { urls: [AMQP_URL] }, queues: { work: { max_size: 3 } } });
    try {
      expect(config.broker.management).to.equal(`http://guest:guest@${new URL(AMQP_URL).hostname}:15672/`);
      await provisionBroker(config, [{ name: 's', input: 'work', outputs: [] }], log);
      expect(await raw.exchangeExists(new BrokerNames(config.prefix).tenantExchange('acme'))).to.equal(true);
    } finally {
      await teardown(config, [{ name: 's', input: 'work', outputs: [] }]);
    }
  });
});
