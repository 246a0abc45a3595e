import { EventEmitter } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import type { ControlMessage } from '../../src/control/control-protocol.js';
import { createLogger } from '../../src/logging/logger.js';
import { PooledRoster } from '../../src/runner/process/pooled-roster.js';
import type { StageInstance } from '../../src/runner/process/stage-instance.js';
import { TenantRoster, type TenantRosterOptions } from '../../src/runner/process/tenant-roster.js';
import type { AttachHints, PooledResources, StageRunner, StageRunnerOptions } from '../../src/runner/stage-runner.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { coreTopology, mergeTopologies } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import type { Topology } from '../../src/topology/topology.types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// The refusals these tests provoke are logged as errors: not printed among the results.
const log = Object.assign(createLogger({ test: 'tenant-roster' }, 'error'), { silent: true });
const config = withTestConfig(
  { tenants: ['acme', 'globex'], gracePeriod: 7, stages: { flaky: { module: './failure-stages.js' } } },
  path.join(here, '../fixtures/config.json'),
);

/** A runner as the roster sees it: what it was built with and what it was asked. */
class FakeRunner extends EventEmitter {
  readonly calls: string[] = [];
  readonly attachHints: AttachHints[] = [];
  stopping = false;
  healthy = true;
  /** The topology it would declare: its name, to recognise it in a declaration (a test may give it a real one). */
  topology: unknown;
  /** Set by a test: the topology every runner built from now on has. */
  static topologyOf: ((tenant: string | undefined) => unknown) | undefined;
  constructor(readonly options: StageRunnerOptions) {
    super();
    this.topology = FakeRunner.topologyOf?.(options.tenant) ?? { of: this.name };
  }
  get name(): string {
    return `${this.options.stage.metadata.name}/${this.options.tenant ?? 'shared'}`;
  }
  get tenant(): string | undefined {
    return this.options.tenant;
  }
  get stageName(): string {
    return this.options.stage.metadata.name;
  }
  get inputQueue(): string {
    return this.options.stage.metadata.input;
  }
  get queue(): string {
    return `${this.inputQueue}.${this.options.tenant ?? ''}`;
  }
  get target(): { queue: string; tenant?: string } {
    return { queue: this.inputQueue, ...(this.tenant === undefined ? {} : { tenant: this.tenant }) };
  }
  get pooledResources(): PooledResources | undefined {
    return this.options.pooled;
  }
  matches(message: ControlMessage): boolean {
    return message.tenant === undefined || message.tenant === this.tenant;
  }
  prepare(): Promise<void> {
    this.calls.push('prepare');
    return Promise.resolve();
  }
  attach(_connection: AmqpConnection, hints: AttachHints = {}): Promise<void> {
    this.calls.push('attach');
    this.attachHints.push(hints);
    return this.attachFails === undefined ? Promise.resolve() : Promise.reject(this.attachFails);
  }
  attachFails: Error | undefined;
  detach(): void {
    this.calls.push('detach');
  }
  stop(graceMs: number): Promise<boolean> {
    this.calls.push(`stop ${graceMs}`);
    this.stopping = true;
    return Promise.resolve(true);
  }
}

const open = (): AmqpConnection => new EventEmitter() as unknown as AmqpConnection;

/** A tenant's part of a `work` stage's topology: its exchange, its queue with both companions, their bindings. */
function workTopology(tenant: string): Topology {
  const names = new BrokerNames(config.prefix);
  return {
    exchanges: [{ name: names.tenantExchange(tenant), type: 'direct', durable: true }],
    queues: [names.queue('work', tenant), names.dueQueue('work', tenant), names.suspectQueue('work', tenant)].map((name) => ({
      name,
      durable: true,
      arguments: {},
    })),
    bindings: [
      { source: names.tenantExchange(tenant), destination: names.queue('work', tenant), destinationType: 'queue', routingKey: 'work' },
      { source: names.delayDeliver, destination: names.dueQueue('work', tenant), destinationType: 'queue', routingKey: 'due' },
      { source: names.delayDeliver, destination: names.suspectQueue('work', tenant), destinationType: 'queue', routingKey: 'suspect' },
    ],
  };
}

describe('TenantRoster and PooledRoster (who the runners of a process serve)', () => {
  let stage: LoadedStage;
  before(async () => {
    [stage] = await loadAllStages(config);
  });

  function base(fatal: Error[] = []): TenantRosterOptions & { built: FakeRunner[] } {
    const built: FakeRunner[] = [];
    return {
      built,
      config,
      log,
      runnerOptions: (instance: StageInstance) => ({ config, log, ...instance }) as StageRunnerOptions,
      onFatal: (err) => void fatal.push(err),
      createRunner: (options) => {
        const runner = new FakeRunner(options);
        built.push(runner);
        return runner as unknown as StageRunner;
      },
    };
  }

  describe('unpooled (run --tenant T, dev)', () => {
    it('serves its instances, removes a tenant after its runner drained within the grace period, and takes none', async () => {
      const options = base();
      const roster = new TenantRoster(options);
      for (const tenant of ['acme', 'globex']) roster.admit({ stage, tenant });
      expect(roster.tenants).to.deep.equal(['acme', 'globex']);
      await roster.prepare();
      await roster.attach(open());
      expect(options.built.map((r) => r.calls)).to.deep.equal([
        ['prepare', 'attach'],
        ['prepare', 'attach'],
      ]);
      expect(options.built[0].options.pooled).to.equal(undefined);

      const added = await roster.addTenant('initech').catch((err: unknown) => err);
      expect(added).to.be.instanceOf(Error).with.property('message', 'addTenant: not a pooled group');

      expect(await roster.removeTenant('acme')).to.equal(true);
      expect(options.built[0].calls).to.include('stop 7000');
      expect(roster.tenants).to.deep.equal(['globex']);
      expect(await roster.removeTenant('acme')).to.equal(false);
    });

    it('a runner that cannot recover fails the process', () => {
      const fatal: Error[] = [];
      const options = base(fatal);
      const roster = new TenantRoster(options);
      roster.admit({ stage, tenant: 'acme' });
      options.built[0].emit('fatal', new Error('channel keeps failing'));
      expect(fatal.map((e) => e.message)).to.deep.equal(['channel keeps failing']);
      expect(roster.tenants).to.deep.equal(['acme']);
    });

    it('terminate stops the runners addressed, and says when the process has nothing left', async () => {
      const options = base();
      const roster = new TenantRoster(options);
      for (const tenant of ['acme', 'globex']) roster.admit({ stage, tenant });
      const message: ControlMessage = { command: 'terminate', tenant: 'acme' };
      expect(await roster.terminate(roster.matching(message), 'acme')).to.equal(false);
      expect(roster.runners.map((r) => r.stopping)).to.deep.equal([true, false]);
      expect(await roster.terminate(roster.matching({ command: 'terminate' }), undefined)).to.equal(true);
    });
  });

  describe('pooled (run --tenants, --all-tenants)', () => {
    function pooled(over: { follow?: boolean; connection?: AmqpConnection } = {}) {
      const fatal: Error[] = [];
      const options = base(fatal);
      const declared: unknown[] = [];
      const released: string[] = [];
      const roster = new PooledRoster({
        ...options,
        pooled: { stage, follow: over.follow ?? false },
        ledger: { record: () => undefined } as never,
        onQueueFull: () => undefined,
        connection: () => over.connection,
        declare: (_connection, topology) => {
          declared.push(topology);
          return Promise.resolve();
        },
      });
      const release = roster.pool.release.bind(roster.pool);
      roster.pool.release = (tenant, resources) => {
        released.push(tenant);
        return release(tenant, resources);
      };
      return { roster, built: options.built, declared, released, fatal };
    }

    it('gives each runner its share of the pool, and adds a tenant while it runs (not yet attached: with everyone at the next attach)', async () => {
      const { roster, built, declared } = pooled();
      roster.admit({ stage, tenant: 'acme' });
      expect(built[0].options.pooled).to.include({ share: roster.pool.share, weight: 1 });
      // The first runner's interval between looks for suspects follows the pool's size at each look.
      const checkMs = built[0].options.suspectCheckMs as () => number;
      expect(checkMs()).to.equal(5000);

      expect(await roster.addTenant('globex')).to.equal(true);
      expect(roster.tenants).to.deep.equal(['acme', 'globex']);
      expect(built[1].calls).to.deep.equal(['prepare']);
      expect(declared).to.deep.equal([]);
      // Served already: nothing changes.
      expect(await roster.addTenant('globex')).to.equal(false);
      expect(built).to.have.length(2);
      // 400 tenants: every runner, the first too, looks every 400 x 15 ms (about 67 looks a second in all).
      for (let i = 2; i < 400; i++) roster.admit({ stage, tenant: `t${i}` });
      expect(checkMs()).to.equal(6000);
    });

    it('a tenant added while attached declares its topology and attaches at once', async () => {
      const { roster, built, declared } = pooled({ connection: open() });
      expect(await roster.addTenant('acme')).to.equal(true);
      expect(declared).to.deep.equal([built[0].topology]);
      expect(built[0].calls).to.deep.equal(['prepare', 'attach']);
      expect(built[0].attachHints).to.deep.equal([{ declared: true }]);
    });

    it('a tenant a live broker refuses is removed again, its place in the pool released', async () => {
      const { roster, built, released } = pooled({ connection: open() });
      const added = roster.addTenant('acme');
      built[0].attachFails = new Error('ACCESS_REFUSED');
      expect(await added).to.equal(false);
      expect(roster.tenants).to.deep.equal([]);
      expect(built[0].calls).to.include('stop 7000');
      expect(released).to.deep.equal(['acme']);
    });

    it('removes a tenant: its runner drains, then its place in the pool goes back', async () => {
      const { roster, built, released } = pooled();
      for (const tenant of ['acme', 'globex']) roster.admit({ stage, tenant });
      expect(await roster.removeTenant('acme')).to.equal(true);
      expect(built[0].calls).to.deep.equal(['stop 7000']);
      expect(released).to.deep.equal(['acme']);
      expect(roster.tenants).to.deep.equal(['globex']);
      expect(await roster.removeTenant('acme')).to.equal(false);
      expect(released).to.deep.equal(['acme']);
    });

    it('detaches the pool with the runners, and takes no tenant once frozen (the group stopping)', async () => {
      const { roster, built } = pooled();
      roster.admit({ stage, tenant: 'acme' });
      roster.detach();
      expect(built[0].calls).to.deep.equal(['detach']);
      await roster.freeze();
      expect(await roster.addTenant('globex')).to.equal(false);
      expect(roster.tenants).to.deep.equal(['acme']);
      await roster.close();
    });

    it('terminate --tenant T releases that tenant alone; the process goes on', async () => {
      const { roster, released } = pooled();
      for (const tenant of ['acme', 'globex']) roster.admit({ stage, tenant });
      expect(await roster.terminate(roster.matching({ command: 'terminate', tenant: 'acme' }), 'acme')).to.equal(false);
      expect(roster.tenants).to.deep.equal(['globex']);
      expect(released).to.deep.equal(['acme']);
    });

    it('following the broker, a runner whose queue is gone for good is released instead of failing the process', async () => {
      const { roster, built, fatal, released } = pooled({ follow: true });
      for (const tenant of ['acme', 'globex']) roster.admit({ stage, tenant });
      built[0].emit('fatal', new Error('queue gone'));
      await new Promise((resolve) => setImmediate(resolve));
      expect(fatal).to.deep.equal([]);
      expect(roster.tenants).to.deep.equal(['globex']);
      expect(released).to.deep.equal(['acme']);
      await roster.freeze();
    });

    it('following the broker, an attach declares nothing of a tenant found there (its suspects on first use) beside the core, and all of a configured one', async () => {
      const { roster, built, declared } = pooled({ follow: true });
      for (const tenant of ['acme', 'initech']) roster.admit({ stage, tenant });
      const names = new BrokerNames(config.prefix);
      // A tenant's topology as a stage builds it: the core, and its queue with its companions.
      const topologyOf = (tenant: string): Topology => mergeTopologies(coreTopology(config), workTopology(tenant));
      built[0].topology = topologyOf('acme');
      built[1].topology = topologyOf('initech');
      roster.pool.attach = () => Promise.resolve();
      roster.pool.statesOf = (targets) => Promise.resolve(targets.map(() => 'active' as const));
      await roster.attach(open());
      const topology = declared[0] as Topology;
      const queues = topology.queues.map((queue) => queue.name);
      // acme is configured (config.tenants): it may have no `provision` behind it.
      expect(queues).to.include.members([names.queue('work', 'acme'), names.dueQueue('work', 'acme'), names.suspectQueue('work', 'acme')]);
      // initech was provisioned: its queue, `due` and tenant exchange are provision's, not declared
      // again; its suspect queue is declared before a job is first moved there (SuspectDeclaration).
      expect(queues.filter((queue) => queue.includes('initech'))).to.deep.equal([]);
      expect(topology.exchanges.map((exchange) => exchange.name)).not.to.include(names.tenantExchange('initech'));
      expect(topology.bindings.map((binding) => binding.destination).filter((name) => name.includes('initech'))).to.deep.equal([]);
      expect(built.map((runner) => runner.options.pooled?.suspectOnFirstUse)).to.deep.equal([undefined, true]);
      expect(queues).to.include.members(coreTopology(config).queues.map((queue) => queue.name));
      expect(built.map((runner) => runner.attachHints)).to.deep.equal([
        [{ declared: true, state: 'active' }],
        [{ declared: true, state: 'active' }],
      ]);
      await roster.freeze();
    });

    it('following the broker, a tenant learnt while attached declares its topology but its suspect part; a configured one all of it', async () => {
      const { roster, built, declared } = pooled({ follow: true, connection: open() });
      const names = new BrokerNames(config.prefix);
      FakeRunner.topologyOf = (tenant) => workTopology(tenant as string);
      try {
        expect(await roster.addTenant('initech')).to.equal(true);
        expect(await roster.addTenant('acme')).to.equal(true);
      } finally {
        FakeRunner.topologyOf = undefined;
      }
      const [initech, acme] = declared as Topology[];
      expect(initech.queues.map((queue) => queue.name)).to.deep.equal([names.queue('work', 'initech'), names.dueQueue('work', 'initech')]);
      expect(initech.bindings.map((binding) => binding.destination)).to.deep.equal([
        names.queue('work', 'initech'),
        names.dueQueue('work', 'initech'),
      ]);
      expect(initech.exchanges).to.deep.equal(workTopology('initech').exchanges);
      expect(acme).to.deep.equal(workTopology('acme'));
      expect(built.map((runner) => runner.options.pooled?.suspectOnFirstUse)).to.deep.equal([true, undefined]);
      await roster.freeze();
    });

    it('admits a tenant without a minimum without going over the tenants served (10,000 admits were 10^8 steps)', () => {
      const { roster } = pooled();
      let reads = 0;
      const served = Object.getOwnPropertyDescriptor(TenantRoster.prototype, 'tenants')?.get as () => string[];
      Object.defineProperty(roster, 'tenants', {
        get: () => {
          reads += 1;
          return served.call(roster);
        },
      });
      for (let i = 0; i < 100; i++) roster.admit({ stage, tenant: `t${i}` });
      expect(reads).to.equal(0);
      expect(roster.runners).to.have.length(100);
    });

    it('without following, a runner that cannot recover fails the process', () => {
      const { roster, built, fatal } = pooled();
      roster.admit({ stage, tenant: 'acme' });
      built[0].emit('fatal', new Error('channel keeps failing'));
      expect(fatal.map((e) => e.message)).to.deep.equal(['channel keeps failing']);
    });
  });
});
