import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { nodeLabel, nodeOrder } from '../../src/broker/broker-nodes.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { applyEnvironment } from '../../src/config/load-config.js';
import { queueFor } from '../../src/config/queue-resolver.js';
import { ConfigError } from '../../src/errors/errors.js';
import { mergeTopologies, provisionTopology, stageDeclaredTopology } from '../../src/topology/build-topology.js';
import { queuePolicies } from '../../src/topology/queue-policies.js';
import type { Topology } from '../../src/topology/topology.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { startHealthServer, type Readiness } from '../../src/observability/health-server.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

const STAGES = [{ name: 'converter', input: 'conversions', outputs: ['representations'] }];
/** The policy keys RabbitMQ 3.10 takes on a quorum queue (and `overflow` values it knows there). */
const QUORUM_POLICY_KEYS = new Set(['max-length', 'max-length-bytes', 'overflow', 'message-ttl', 'dead-letter-exchange', 'delivery-limit']);

function queueArguments(topology: Topology, name: string): Record<string, string | number> {
  const queue = topology.queues.find((q) => q.name === name);
  if (!queue) throw new Error(`no queue ${name} in the topology`);
  return queue.arguments;
}

describe('configuration and topology for a RabbitMQ cluster', () => {
  describe('queues.<name>.type', () => {
    it('is classic by default, and inherited through _default', () => {
      expect(compileConfig({ queues: { a: {} } }).queues.get('a')?.type).to.equal('classic');
      const config = compileConfig({ queues: { _default: { type: 'quorum' }, a: {}, b: { type: 'classic' } } });
      expect(config.queues.get('a')?.type).to.equal('quorum');
      expect(config.queues.get('b')?.type).to.equal('classic');
      expect(queueFor(config, 'implicit').type).to.equal('quorum');
    });

    it('refuses max_priority on a quorum queue at compile time, naming the key where it is set', () => {
      const own = configError(() => compileConfig({ queues: { a: { type: 'quorum', max_priority: 5 } } }));
      expect(own.key).to.equal('queues.a.max_priority');
      expect(own.message).to.include('quorum');
      const inherited = configError(() => compileConfig({ queues: { _default: { max_priority: 5 }, a: { type: 'quorum' } } }));
      expect(inherited.key).to.equal('queues._default.max_priority');
      // A classic queue under a quorum _default may keep its priorities.
      expect(
        compileConfig({ queues: { _default: { type: 'quorum' }, a: { type: 'classic', max_priority: 5 } } }).queues.get('a')?.max_priority,
      ).to.equal(5);
    });

    it('refuses a quorum queue in a transient topology (durable false)', () => {
      expect(configError(() => compileConfig({ durable: false, queues: { a: { type: 'quorum' } } })).key).to.equal('durable');
    });

    it('refuses an unknown type through the schema', () => {
      expect(configError(() => compileConfig({ queues: { a: { type: 'stream' } } })).key).to.equal('queues.a.type');
    });
  });

  describe('topology of quorum queues', () => {
    const config = compileConfig({
      tenants: ['acme'],
      queues: {
        conversions: { type: 'quorum', max_size: 10, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
        representations: { type: 'classic', max_priority: 3 },
      },
    });
    // With the suspect queues the stages declare, so that every kind of queue is here.
    const topology = mergeTopologies(provisionTopology(config, STAGES, 'acme'), stageDeclaredTopology(config, STAGES, 'acme'));

    it('declares main, variant, due, suspect and dead queues of a quorum queue as quorum, with their dead-letter route', () => {
      for (const name of [
        'ojs.queue.conversions.acme',
        'ojs.queue.conversions.acme.pdf',
        'ojs.due.conversions.acme',
        'ojs.suspect.conversions.acme.pdf',
        'ojs.dead.conversions.acme',
      ]) {
        const args = queueArguments(topology, name);
        expect(args['x-queue-type'], name).to.equal('quorum');
        expect(args).to.not.have.property('x-max-priority');
      }
      expect(queueArguments(topology, 'ojs.queue.conversions.acme')['x-dead-letter-exchange']).to.equal('ojs.dlx');
    });

    it('leaves classic queues as they were (no x-queue-type: nothing to recreate on an existing broker)', () => {
      expect(queueArguments(topology, 'ojs.queue.representations.acme')).to.not.have.property('x-queue-type');
      expect(queueArguments(topology, 'ojs.queue.representations.acme')['x-max-priority']).to.equal(3);
      const plain = compileConfig({ tenants: ['acme'] });
      const classic = mergeTopologies(provisionTopology(plain, STAGES, 'acme'), stageDeclaredTopology(plain, STAGES, 'acme'));
      // The tracking log, the job cancels and the schedules are streams whatever the other queues are.
      const streams = new Set(['ojs.tracking', 'ojs.job-cancels', 'ojs.schedules']);
      for (const queue of classic.queues.filter((q) => !streams.has(q.name))) {
        expect(queue.arguments, queue.name).to.not.have.property('x-queue-type');
      }
    });

    it('makes the shared delay ladder and unroutable queue quorum as soon as one queue is, the ladder with at-least-once dead-lettering', () => {
      const ladder = queueArguments(topology, 'ojs.delay.0');
      expect(ladder).to.include({
        'x-queue-type': 'quorum',
        'x-dead-letter-strategy': 'at-least-once',
        'x-overflow': 'reject-publish',
        'x-message-ttl': 1000,
      });
      expect(queueArguments(topology, 'ojs.unroutable')['x-queue-type']).to.equal('quorum');
    });

    it('sets only policies a quorum queue takes on quorum queues (the classic queue alone gets a queue version)', () => {
      const policies = queuePolicies(config, STAGES);
      expect(policies.length).to.be.greaterThan(0);
      for (const policy of policies) {
        for (const [key, value] of Object.entries(policy.definition)) {
          const classic = key === 'queue-version' && policy.name.includes('.representations');
          expect(classic || QUORUM_POLICY_KEYS.has(key), `${policy.name}: ${key}`).to.equal(true);
          if (key === 'overflow') expect(['reject-publish', 'drop-head'], `${policy.name}: overflow`).to.include(value);
        }
      }
    });
  });

  describe('broker.urls', () => {
    const a = 'amqp://u:p@a:5672/v';
    const b = 'amqp://u:p@b:5673/v';

    it('lists every node, the first as broker.url; broker.url alone is a cluster of one', () => {
      expect(compileConfig({ broker: { urls: [a, b] } }).broker).to.include({ url: a });
      expect(compileConfig({ broker: { urls: [a, b] } }).broker.urls).to.deep.equal([a, b]);
      expect(compileConfig({ broker: { url: b, urls: [a, b] } }).broker.urls).to.deep.equal([b, a]);
      expect(compileConfig({ broker: { url: a } }).broker.urls).to.deep.equal([a]);
    });

    it('refuses nodes with another user or virtual host, a URL listed twice, and a broker.url not among them', () => {
      expect(configError(() => compileConfig({ broker: { urls: [a, 'amqp://u:p@b:5672/w'] } })).key).to.equal('broker.urls.1');
      expect(configError(() => compileConfig({ broker: { urls: [a, 'amqp://x:p@b:5672/v'] } })).key).to.equal('broker.urls.1');
      expect(configError(() => compileConfig({ broker: { urls: [a, a] } })).key).to.equal('broker.urls.1');
      expect(configError(() => compileConfig({ broker: { url: 'amqp://u:p@c:5672/v', urls: [a, b] } })).key).to.equal('broker.url');
      expect(configError(() => compileConfig({ broker: { urls: [] } })).key).to.equal('broker.urls');
    });

    it('takes AMQP_URL with comma-separated URLs as the node list, replacing the file broker', () => {
      const raw = { broker: { url: 'amqp://x@old/', heartbeat: 5 } };
      expect(applyEnvironment(raw, { AMQP_URL: `${a}, ${b}` })).to.deep.equal({ broker: { urls: [a, b], heartbeat: 5 } });
      expect(applyEnvironment({ broker: { urls: [a, b] } }, { AMQP_URL: a })).to.deep.equal({ broker: { url: a } });
    });

    it('tries every node once per attempt, from the one after the lost node, and names nodes without credentials', () => {
      expect(nodeOrder(3, 0)).to.deep.equal([0, 1, 2]);
      expect(nodeOrder(3, 2)).to.deep.equal([2, 0, 1]);
      expect(nodeOrder(3, 3)).to.deep.equal([0, 1, 2]);
      expect(nodeOrder(1, 1)).to.deep.equal([0]);
      expect(nodeLabel('amqp://u:secret@rabbit-1:5673/v')).to.equal('rabbit-1:5673');
      expect(nodeLabel('amqps://u:secret@rabbit-1/v')).to.equal('rabbit-1:5671');
    });
  });

  describe('broker.management', () => {
    const a = 'amqp://app:s%40cret@rabbit-1:5672/v';
    const b = 'amqps://app:s%40cret@rabbit-2/v';

    it('defaults to the management port of each AMQP node, with its credentials, in the order the nodes are tried', () => {
      const broker = compileConfig({ broker: { urls: [a, b] } }).broker;
      expect(broker.management).to.equal('http://app:s%40cret@rabbit-1:15672/');
      expect(broker.managementUrls).to.deep.equal(['http://app:s%40cret@rabbit-1:15672/', 'https://app:s%40cret@rabbit-2:15671/']);
      expect(compileConfig({ broker: { url: b, urls: [a, b] } }).broker.management).to.equal('https://app:s%40cret@rabbit-2:15671/');
      expect(compileConfig({ broker: { url: 'amqp://u:p@10.0.0.7:5679/' } }).broker.managementUrls).to.deep.equal([
        'http://u:p@10.0.0.7:15672/',
      ]);
      expect(compileConfig({}).broker.managementUrls).to.deep.equal(['http://guest:guest@localhost:15672/']);
      // AMQP_URL moves the management API with it.
      const moved = compileConfig(applyEnvironment({}, { AMQP_URL: 'amqp://ops:pw@rabbit-9:5672/' }));
      expect(moved.broker.management).to.equal('http://ops:pw@rabbit-9:15672/');
    });

    it('an explicit broker.management (or STAGECOACH_MANAGEMENT_URL) is the only one', () => {
      const broker = compileConfig({ broker: { urls: [a, b], management: 'https://ops:pw@mgmt.example:443/' } }).broker;
      expect(broker.managementUrls).to.deep.equal(['https://ops:pw@mgmt.example:443/']);
      expect(broker.management).to.equal('https://ops:pw@mgmt.example:443/');
    });

    it('never makes the user a stage connects as the trusted operator', () => {
      expect(compileConfig({ broker: { url: 'amqp://acme-stage:pw@rabbit-1/' } }).security.operatorUser).to.equal('guest');
      expect(compileConfig({ broker: { url: a, management: 'http://ops:pw@rabbit-1:15672/' } }).security.operatorUser).to.equal('ops');
    });

    it('fails over to the next node when one does not answer, and stays with the one that did', async () => {
      const seen: string[] = [];
      const server = createServer((req, res) => {
        seen.push(`${req.method} ${req.url} ${req.headers.authorization}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify([{ name: 'guest' }]));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const closedPort = (closed.address() as AddressInfo).port;
      await new Promise((resolve) => closed.close(resolve));
      try {
        const api = new ManagementClient([
          `http://u:p@127.0.0.1:${closedPort}/`,
          `http://u:p@127.0.0.1:${(server.address() as AddressInfo).port}/`,
        ]);
        expect(await api.listUsers()).to.deep.equal(['guest']);
        expect(await api.listUsers()).to.deep.equal(['guest']);
        expect(seen).to.deep.equal(Array(2).fill(`GET /api/users?columns=name Basic ${Buffer.from('u:p').toString('base64')}`));
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });

  it('says on /readyz which node the process is connected to, and nothing of a node while it has none', async () => {
    let state: Readiness = { ready: true, node: 'rabbit-2:5672' };
    const metrics = { text: async () => '', contentType: 'text/plain' };
    const server = await startHealthServer({ port: 0, host: '127.0.0.1', metrics, readiness: () => state, log: createLogger({}, 'error') });
    try {
      const body = async () => (await fetch(`http://127.0.0.1:${server.port}/readyz`)).json();
      expect(await body()).to.deep.equal({ ready: true, node: 'rabbit-2:5672' });
      state = { ready: false, reason: 'not connected to the broker' };
      expect(await body()).to.deep.equal({ ready: false, reason: 'not connected to the broker' });
    } finally {
      await server.close();
    }
  });
});
