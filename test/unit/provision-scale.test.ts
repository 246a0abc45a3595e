import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import { missingTopology } from '../../src/plan/missing-topology.js';
import type { BrokerBinding, BrokerExchange, BrokerQueue } from '../../src/broker-management/management-client.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { inParallel } from '../../src/util/in-parallel.js';

describe('inParallel', () => {
  it('runs every item with at most `limit` at once, each lane taking the next item', async () => {
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    const lanes = new Set<number>();
    await inParallel([...Array(20).keys()], 4, async (item, lane) => {
      running += 1;
      most = Math.max(most, running);
      lanes.add(lane);
      await new Promise((resolve) => setTimeout(resolve, item % 3));
      seen.push(item);
      running -= 1;
    });
    expect(most).to.equal(4);
    expect([...lanes].sort()).to.deep.equal([0, 1, 2, 3]);
    expect(seen.sort((a, b) => a - b)).to.deep.equal([...Array(20).keys()]);
  });

  it('throws the first failure once the running items settle, and starts no more', async () => {
    const started: number[] = [];
    let settled = 0;
    const err = await inParallel([...Array(50).keys()], 3, async (item) => {
      started.push(item);
      await new Promise((resolve) => setTimeout(resolve, 1));
      settled += 1;
      if (item === 4) throw new Error('refused 4');
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).to.equal('refused 4');
    expect(started.length).to.be.lessThan(10);
    expect(settled, 'nothing left running behind the caller').to.equal(started.length);
  });

  it('does nothing for no items', async () => {
    await inParallel([], 8, () => Promise.reject(new Error('never')));
  });
});

describe('missingTopology', () => {
  const config = compileConfig({ prefix: 'ojs', tenants: ['acme', 'globex'], queues: { scans: { scope: 'tenant', max_priority: 5 } } });
  const topology = provisionTopology(config, []);
  const asBroker = {
    exchanges: topology.exchanges.map((e): BrokerExchange => ({
      name: e.name,
      type: e.type,
      durable: e.durable,
      auto_delete: false,
      internal: false,
      arguments: e.alternateExchange === undefined ? {} : { 'alternate-exchange': e.alternateExchange },
    })),
    // The management API gives numbers as numbers: compared as strings, like `plan` does.
    queues: topology.queues.map((q): BrokerQueue => ({
      name: q.name,
      durable: q.durable,
      auto_delete: false,
      exclusive: false,
      arguments: { ...q.arguments },
    })),
    bindings: topology.bindings.map((b): BrokerBinding => ({
      source: b.source,
      destination: b.destination,
      destination_type: b.destinationType,
      routing_key: b.routingKey,
      arguments: b.arguments ?? {},
    })),
  };

  it('is everything on an empty broker, and nothing when the broker holds it all', () => {
    expect(missingTopology(topology, { exchanges: [], queues: [], bindings: [] })).to.deep.equal(topology);
    expect(missingTopology(topology, asBroker)).to.deep.equal({ exchanges: [], queues: [], bindings: [] });
  });

  it('keeps what is absent or different, so the broker refuses a conflict and provision names it', () => {
    const globexQueue = topology.queues.find((q) => q.name === 'ojs.queue.scans.globex');
    const inventory = {
      exchanges: asBroker.exchanges.map((e) => (e.name === 'ojs.tenant.acme' ? { ...e, arguments: {} } : e)),
      queues: asBroker.queues
        .filter((q) => q.name !== 'ojs.dead.scans.acme')
        .map((q) => (q.name === globexQueue?.name ? { ...q, arguments: { ...q.arguments, 'x-max-priority': 9 } } : q)),
      bindings: asBroker.bindings.filter((b) => b.destination !== 'ojs.queue.scans.acme'),
    };
    const missing = missingTopology(topology, inventory);
    expect(missing.exchanges.map((e) => e.name)).to.deep.equal(['ojs.tenant.acme']);
    expect(missing.queues.map((q) => q.name).sort()).to.deep.equal(['ojs.dead.scans.acme', 'ojs.queue.scans.globex']);
    expect(missing.bindings.map((b) => `${b.source} -> ${b.destination}`)).to.deep.equal(['ojs.tenant.acme -> ojs.queue.scans.acme']);
    expect(missing.bindings[0]?.drainMarker, 'the entry keeps its drain marker, checked when declared').to.equal(
      'ojs.state.draining.scans.acme',
    );
  });
});
