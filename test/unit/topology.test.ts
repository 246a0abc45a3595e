import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import type { RawConfig } from '../../src/config/config.types.js';
import { mergeTopologies, provisionTopology, stageDeclaredTopology, stageTopology } from '../../src/topology/build-topology.js';
import { DELAY_LEVELS, delayRoutingKey, MAX_DELAY_SECONDS } from '../../src/topology/delay-topology.js';
import type { Topology } from '../../src/topology/topology.types.js';

/** The topology without the delay ladder and the bindings that bring retries back, tested apart below. */
function withoutLadder(topology: Topology): Topology {
  const ladder = (name: string): boolean => name === 'ojs.retry' || name.startsWith('ojs.delay.');
  return {
    exchanges: topology.exchanges.filter((e) => !ladder(e.name)),
    queues: topology.queues.filter((q) => !ladder(q.name)),
    bindings: topology.bindings.filter((b) => !ladder(b.source)),
  };
}

const raw: RawConfig = {
  tenants: ['acme', 'globex'],
  queues: {
    'scan-specs': { scope: 'shared' },
    conversions: { scope: 'tenant', max_size: 100, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
  },
};
const config = compileConfig(raw);

describe('topology', () => {
  it('declares exactly the core and the input chain for a tenant-scoped stage with variants', () => {
    const topology = withoutLadder(
      stageTopology(config, { name: 'converter', input: 'conversions', outputs: ['representations'] }, 'acme'),
    );
    expect(topology.exchanges).to.deep.equal([
      { name: 'ojs.unroutable', type: 'fanout', durable: true },
      { name: 'ojs.root', type: 'headers', durable: true, alternateExchange: 'ojs.unroutable' },
      { name: 'ojs.direct', type: 'direct', durable: true, alternateExchange: 'ojs.unroutable' },
      { name: 'ojs.dlx', type: 'direct', durable: true },
      { name: 'ojs.control', type: 'fanout', durable: true },
      { name: 'ojs.events', type: 'topic', durable: true },
      // Parked jobs of paused batches and tenants; unbound keys are kept in unroutable.
      { name: 'ojs.park', type: 'topic', durable: true, alternateExchange: 'ojs.unroutable' },
      // The way into the tracking stream: not the default exchange, which tenant users may not write.
      { name: 'ojs.tracking', type: 'fanout', durable: true },
      // The way into the stream of job cancels every stage reads (docs/job-state.md).
      { name: 'ojs.job-cancels', type: 'fanout', durable: true },
      { name: 'ojs.schedules', type: 'fanout', durable: true },
      { name: 'ojs.tenant.acme', type: 'direct', durable: true, alternateExchange: 'ojs.unroutable' },
      { name: 'ojs.general.conversions.acme', type: 'fanout', durable: true },
      { name: 'ojs.variants.conversions.acme', type: 'headers', durable: true, alternateExchange: 'ojs.general.conversions.acme' },
    ]);
    // max_size is a policy (queue-policies.ts), not an argument: it must change in place.
    const work = { 'x-dead-letter-exchange': 'ojs.dlx', 'x-dead-letter-routing-key': 'ojs.dead.conversions.acme' };
    // `due` and `suspect` are never bounded: the broker must never dead-letter into a full queue.
    const companion = { 'x-dead-letter-exchange': 'ojs.dlx', 'x-dead-letter-routing-key': 'ojs.dead.conversions.acme' };
    expect(topology.queues).to.deep.equal([
      { name: 'ojs.unroutable', durable: true, arguments: {} },
      { name: 'ojs.parked', durable: true, arguments: {} },
      // Batch tracking: always durable (a stream cannot be otherwise), retention 7 days by default.
      { name: 'ojs.tracking', durable: true, arguments: { 'x-queue-type': 'stream', 'x-max-age': '604800s' } },
      { name: 'ojs.job-cancels', durable: true, arguments: { 'x-queue-type': 'stream', 'x-max-age': '604800s' } },
      {
        name: 'ojs.schedules',
        durable: true,
        arguments: { 'x-queue-type': 'stream', 'x-max-length-bytes': 1024 ** 3, 'x-stream-max-segment-size-bytes': 16 * 1024 ** 2 },
      },
      { name: 'ojs.queue.conversions.acme', durable: true, arguments: work },
      { name: 'ojs.due.conversions.acme', durable: true, arguments: companion },
      { name: 'ojs.suspect.conversions.acme', durable: true, arguments: companion },
      { name: 'ojs.dead.conversions.acme', durable: true, arguments: {} },
      { name: 'ojs.queue.conversions.acme.pdf', durable: true, arguments: work },
      { name: 'ojs.due.conversions.acme.pdf', durable: true, arguments: companion },
      { name: 'ojs.suspect.conversions.acme.pdf', durable: true, arguments: companion },
    ]);
    expect(topology.bindings).to.deep.equal([
      { source: 'ojs.unroutable', destination: 'ojs.unroutable', destinationType: 'queue', routingKey: '' },
      { source: 'ojs.park', destination: 'ojs.parked', destinationType: 'queue', routingKey: '#' },
      { source: 'ojs.tracking', destination: 'ojs.tracking', destinationType: 'queue', routingKey: '' },
      { source: 'ojs.job-cancels', destination: 'ojs.job-cancels', destinationType: 'queue', routingKey: '' },
      { source: 'ojs.schedules', destination: 'ojs.schedules', destinationType: 'queue', routingKey: '' },
      {
        source: 'ojs.root',
        destination: 'ojs.tenant.acme',
        destinationType: 'exchange',
        routingKey: '',
        arguments: { 'x-match': 'all-with-x', 'x-ojs-tenant': 'acme' },
      },
      { source: 'ojs.dlx', destination: 'ojs.dead.conversions.acme', destinationType: 'queue', routingKey: 'ojs.dead.conversions.acme' },
      {
        source: 'ojs.tenant.acme',
        destination: 'ojs.variants.conversions.acme',
        destinationType: 'exchange',
        routingKey: 'conversions',
        // The entry: left unbound while acme's conversions drain.
        drainMarker: 'ojs.state.draining.conversions.acme',
      },
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
    const topology = withoutLadder(stageTopology(config, { name: 'explorer', input: 'scan-specs', outputs: ['conversions'] }));
    expect(topology.queues.map((q) => q.name)).to.deep.equal([
      'ojs.unroutable',
      'ojs.parked',
      'ojs.tracking',
      'ojs.job-cancels',
      'ojs.schedules',
      'ojs.queue.scan-specs',
      'ojs.due.scan-specs',
      'ojs.suspect.scan-specs',
      'ojs.dead.scan-specs',
    ]);
    expect(topology.bindings).to.deep.include({
      source: 'ojs.direct',
      destination: 'ojs.queue.scan-specs',
      destinationType: 'queue',
      routingKey: 'scan-specs',
      drainMarker: 'ojs.state.draining.scan-specs',
    });
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
      { name: 'explorer', input: 'scan-specs', outputs: ['conversions'] },
      { name: 'matcher', input: 'representations', outputs: [] },
    ]);
    const queues = topology.queues.map((q) => q.name);
    expect(queues).to.include.members([
      'ojs.queue.scan-specs',
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

  it('provisions what must exist before any stage runs, and leaves the suspect queues to the stages that write them', () => {
    const stages = [{ name: 'converter', input: 'conversions', outputs: ['scan-specs'] }];
    const provisioned = provisionTopology(config, stages);
    const names = provisioned.queues.map((q) => q.name);
    // Jobs published before any stage runs wait in the main queue; a scheduled one comes back
    // through the ladder to `due`; one the broker dead-letters (enqueue_ttl) goes to `dead`.
    expect(names).to.include.members([
      'ojs.queue.conversions.acme',
      'ojs.queue.conversions.acme.pdf',
      'ojs.due.conversions.acme',
      'ojs.due.conversions.acme.pdf',
      'ojs.dead.conversions.acme',
      'ojs.queue.scan-specs',
      'ojs.due.scan-specs',
      'ojs.dead.scan-specs',
    ]);
    expect(names.filter((n) => n.startsWith('ojs.suspect.'))).to.deep.equal([]);
    expect(provisioned.bindings.filter((b) => b.destination.startsWith('ojs.suspect.'))).to.deep.equal([]);

    // The stage declares them at start-up: what provision leaves out is exactly what the stages add.
    const declaredByStages = stageDeclaredTopology(config, stages);
    expect(declaredByStages.queues.map((q) => q.name)).to.deep.equal([
      'ojs.suspect.conversions.acme',
      'ojs.suspect.conversions.acme.pdf',
      'ojs.suspect.conversions.globex',
      'ojs.suspect.conversions.globex.pdf',
      'ojs.suspect.scan-specs',
    ]);
    const acme = stageTopology(config, stages[0], 'acme');
    for (const queue of declaredByStages.queues.filter((q) => q.name.includes('.acme'))) expect(acme.queues).to.deep.include(queue);
    for (const binding of declaredByStages.bindings.filter((b) => b.destination.includes('.acme'))) {
      expect(acme.bindings).to.deep.include(binding);
    }
    const everything = mergeTopologies(provisioned, declaredByStages);
    expect(everything.queues).to.deep.include.members(acme.queues);
    expect(everything.bindings).to.deep.include.members(acme.bindings);
  });

  it('provisions the suspect queues too with security.tenantUsers, where stages only check that their queues exist', () => {
    const secured = compileConfig({ ...raw, security: { tenantUsers: true } });
    const stage = { name: 'converter', input: 'conversions', outputs: [] };
    const provisioned = provisionTopology(secured, [stage]);
    expect(stageDeclaredTopology(secured, [stage])).to.deep.equal({ exchanges: [], queues: [], bindings: [] });
    for (const tenant of ['acme', 'globex']) {
      const needed = stageTopology(secured, stage, tenant);
      expect(provisioned.queues).to.deep.include.members(needed.queues);
      expect(provisioned.bindings).to.deep.include.members(needed.bindings);
    }
  });

  it('keeps max_priority an argument (no policy can set it) and the bounds out of the arguments', () => {
    const c = compileConfig({ queues: { q: { scope: 'shared', max_size: 5, overflow_policy: 'drop_oldest', max_priority: 9 } } });
    const queue = stageTopology(c, { name: 's', input: 'q', outputs: [] }).queues.find((q) => q.name === 'ojs.queue.q');
    expect(queue?.arguments).to.deep.equal({
      'x-dead-letter-exchange': 'ojs.dlx',
      'x-dead-letter-routing-key': 'ojs.dead.q',
      'x-max-priority': 9,
    });
  });

  it("provisions a queue's dead_letter_queue, which no stage reads or writes, with it", () => {
    const c = compileConfig({ tenants: ['acme'], queues: { exports: { dead_letter_queue: 'exports-failed' } } });
    const queues = provisionTopology(c, []).queues.map((q) => q.name);
    expect(queues).to.include('ojs.queue.exports-failed.acme');
  });
});

describe('delay ladder', () => {
  const stages = [{ name: 'converter', input: 'conversions', outputs: ['representations'] }];
  const delayQueues = (t: Topology): string[] => t.queues.map((q) => q.name).filter((n) => n.startsWith('ojs.delay.'));

  it('is a fixed set of TTL queues, 2^k seconds each, each dead-lettering to the level below', () => {
    const queues = stageTopology(config, stages[0], 'acme').queues.filter((q) => q.name.startsWith('ojs.delay.'));
    expect(queues).to.have.length(DELAY_LEVELS);
    expect(queues[0]).to.deep.equal({
      name: `ojs.delay.${DELAY_LEVELS - 1}`,
      durable: true,
      arguments: { 'x-message-ttl': 2 ** (DELAY_LEVELS - 1) * 1000, 'x-dead-letter-exchange': `ojs.delay.${DELAY_LEVELS - 2}` },
    });
    expect(queues.at(-1)).to.deep.equal({
      name: 'ojs.delay.0',
      durable: true,
      arguments: { 'x-message-ttl': 1000, 'x-dead-letter-exchange': 'ojs.delay.deliver' },
    });
    expect(MAX_DELAY_SECONDS).to.be.greaterThan(24 * 3600);
  });

  it('has as many delay queues for 50 tenants as for 1', () => {
    const one = compileConfig({ tenants: ['t0'] });
    const fifty = compileConfig({
      tenants: Array.from({ length: 50 }, (_, i) => `t${i}`),
      queues: { extra: {}, more: { scope: 'shared' } },
    });
    expect(delayQueues(provisionTopology(fifty, stages))).to.deep.equal(delayQueues(provisionTopology(one, stages)));
  });

  it('binds the due and suspect queue of every physical queue, variants included, and never the bounded main queue, from the delivery exchange', () => {
    const bindings = stageTopology(config, stages[0], 'acme').bindings.filter((b) => b.source === 'ojs.delay.deliver');
    const stars = '*.'.repeat(DELAY_LEVELS);
    expect(bindings.map((b) => [b.destination, b.routingKey])).to.deep.equal(
      ['ojs.due.conversions.acme', 'ojs.suspect.conversions.acme', 'ojs.due.conversions.acme.pdf', 'ojs.suspect.conversions.acme.pdf'].map(
        (q) => [q, `${stars}${q}`],
      ),
    );
  });

  it('writes the delay in whole seconds as bits, highest level first, then the destination', () => {
    const key = (ms: number): string => delayRoutingKey(ms, 'ojs.queue.q.acme');
    const bits = (seconds: number): string => seconds.toString(2).padStart(DELAY_LEVELS, '0').split('').join('.');
    expect(key(0)).to.equal(`${bits(0)}.ojs.queue.q.acme`);
    expect(key(1000)).to.equal(`${bits(1)}.ojs.queue.q.acme`);
    expect(key(1499)).to.equal(`${bits(1)}.ojs.queue.q.acme`);
    expect(key(86_400_000)).to.equal(`${bits(86400)}.ojs.queue.q.acme`);
    expect(key(10 ** 12)).to.equal(`${bits(MAX_DELAY_SECONDS)}.ojs.queue.q.acme`);
  });
});
