import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import { provisionTopology, stageTopology } from '../../src/topology/build-topology.js';

const config = compileConfig({
  tenants: ['acme', 'globex'],
  queues: {
    scan_specs: { scope: 'shared' },
    conversions: { scope: 'tenant', max_size: 100, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
  },
});

describe('topology', () => {
  it('declares exactly the core and the input chain for a tenant-scoped stage with variants', () => {
    const topology = stageTopology(config, { name: 'converter', input: 'conversions', outputs: ['representations'] }, 'acme');
    expect(topology.exchanges).to.deep.equal([
      { name: 'ojs.unroutable', type: 'fanout', durable: true },
      { name: 'ojs.root', type: 'headers', durable: true, alternateExchange: 'ojs.unroutable' },
      { name: 'ojs.direct', type: 'direct', durable: true, alternateExchange: 'ojs.unroutable' },
      { name: 'ojs.dlx', type: 'direct', durable: true },
      { name: 'ojs.tenant.acme', type: 'direct', durable: true, alternateExchange: 'ojs.unroutable' },
      { name: 'ojs.general.conversions.acme', type: 'fanout', durable: true },
      { name: 'ojs.variants.conversions.acme', type: 'headers', durable: true, alternateExchange: 'ojs.general.conversions.acme' },
    ]);
    const work = { 'x-dead-letter-exchange': 'ojs.dlx', 'x-dead-letter-routing-key': 'ojs.dead.conversions.acme', 'x-max-length': 100, 'x-overflow': 'reject-publish' };
    expect(topology.queues).to.deep.equal([
      { name: 'ojs.unroutable', durable: true, arguments: {} },
      { name: 'ojs.queue.conversions.acme', durable: true, arguments: work },
      { name: 'ojs.dead.conversions.acme', durable: true, arguments: {} },
      { name: 'ojs.queue.conversions.acme.pdf', durable: true, arguments: work },
    ]);
    expect(topology.bindings).to.deep.equal([
      { source: 'ojs.unroutable', destination: 'ojs.unroutable', destinationType: 'queue', routingKey: '' },
      {
        source: 'ojs.root',
        destination: 'ojs.tenant.acme',
        destinationType: 'exchange',
        routingKey: '',
        arguments: { 'x-match': 'all-with-x', 'x-ojs-tenant': 'acme' },
      },
      { source: 'ojs.dlx', destination: 'ojs.dead.conversions.acme', destinationType: 'queue', routingKey: 'ojs.dead.conversions.acme' },
      { source: 'ojs.tenant.acme', destination: 'ojs.variants.conversions.acme', destinationType: 'exchange', routingKey: 'conversions' },
      { source: 'ojs.general.conversions.acme', destination: 'ojs.queue.conversions.acme', destinationType: 'queue', routingKey: '' },
      {
        source: 'ojs.variants.conversions.acme',
        destination: 'ojs.queue.conversions.acme.pdf',
        destinationType: 'queue',
        routingKey: '',
        arguments: { 'x-match': 'all-with-x', mime: 'application/pdf' },
      },
    ]);
  });

  it('routes a shared input through ojs.direct and needs no tenant', () => {
    const topology = stageTopology(config, { name: 'explorer', input: 'scan_specs', outputs: ['conversions'] });
    expect(topology.queues.map((q) => q.name)).to.deep.equal(['ojs.unroutable', 'ojs.queue.scan_specs', 'ojs.dead.scan_specs']);
    expect(topology.bindings).to.deep.include({ source: 'ojs.direct', destination: 'ojs.queue.scan_specs', destinationType: 'queue', routingKey: 'scan_specs' });
    expect(topology.exchanges.map((e) => e.name)).not.to.include('ojs.tenant.acme');
  });

  it('uses the configured tenant header and prefix in bindings and names', () => {
    const custom = compileConfig({ prefix: 'os2ds', tenantHeader: 'org', tenants: ['vejstrand'] });
    const topology = provisionTopology(custom, [{ name: 's', input: 'conversions', outputs: [] }]);
    expect(topology.bindings).to.deep.include({
      source: 'os2ds.root',
      destination: 'os2ds.tenant.vejstrand',
      destinationType: 'exchange',
      routingKey: '',
      arguments: { 'x-match': 'all-with-x', org: 'vejstrand' },
    });
    expect(topology.queues.map((q) => q.name)).to.include('os2ds.queue.conversions.vejstrand');
  });

  it('provisions every queue a stage reads or writes, for every tenant, without duplicates', () => {
    const topology = provisionTopology(config, [
      { name: 'explorer', input: 'scan_specs', outputs: ['conversions'] },
      { name: 'matcher', input: 'representations', outputs: [] },
    ]);
    const queues = topology.queues.map((q) => q.name);
    expect(queues).to.include.members([
      'ojs.queue.scan_specs',
      'ojs.queue.conversions.acme',
      'ojs.queue.conversions.globex.pdf',
      'ojs.queue.representations.acme',
      'ojs.queue.representations.globex',
    ]);
    expect(new Set(queues).size).to.equal(queues.length);
    const rootBindings = topology.bindings.filter((b) => b.source === 'ojs.root');
    expect(rootBindings.map((b) => b.destination)).to.deep.equal(['ojs.tenant.acme', 'ojs.tenant.globex']);
  });

  it('provisions one tenant only when asked', () => {
    const topology = provisionTopology(config, [], 'globex');
    expect(topology.queues.map((q) => q.name).filter((n) => n.includes('acme'))).to.deep.equal([]);
    expect(topology.queues.map((q) => q.name)).to.include('ojs.queue.conversions.globex');
  });

  it('maps drop_oldest to drop-head and honours max_priority', () => {
    const c = compileConfig({ queues: { q: { scope: 'shared', max_size: 5, overflow_policy: 'drop_oldest', max_priority: 9 } } });
    const queue = stageTopology(c, { name: 's', input: 'q', outputs: [] }).queues.find((q) => q.name === 'ojs.queue.q');
    expect(queue?.arguments).to.include({ 'x-overflow': 'drop-head', 'x-max-priority': 9, 'x-max-length': 5 });
  });
});
