import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { AdminEvent } from '../../src/events/admin-events.js';
import { openConnection } from '../../src/broker/amqp-connection.js';
import { declareTopology, PROVISION_LANES } from '../../src/broker/declare-topology.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import type { FlagReader } from '../../src/flags/flag-reader.js';
import { ListedFlags } from '../../src/flags/listed-flags.js';
import { createLogger } from '../../src/logging/logger.js';
import { provisionBroker } from '../../src/plan/provision-broker.js';
import { vhostOfAmqpUrl } from '../../src/security/broker-users.js';
import { ManagementClient, type BrokerBinding } from '../../src/broker-management/management-client.js';
import { isStateMarker } from '../../src/queue-state/queue-state.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { delayDeliveryBinding } from '../../src/topology/delay-topology.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import type { BindingSpec, Topology } from '../../src/topology/topology.types.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';
import { Publisher } from '../../src/publisher/publisher.js';

const here = path.dirname(fileURLToPath(import.meta.url));

const log = createLogger({ test: 'provision-scale' }, 'error');
const TENANTS = 200;
const MANAGEMENT = process.env.STAGECOACH_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672/';

function scaleConfig(): CompiledConfig {
  return compileConfig({
    prefix: `test-${randomBytes(4).toString('hex')}`,
    broker: { url: AMQP_URL, management: MANAGEMENT },
    durable: false,
    tenants: Array.from({ length: TENANTS }, (_, i) => `t${String(i).padStart(3, '0')}`),
    queues: {
      scans: { scope: 'tenant' },
      // Variants: the entry is an exchange-to-exchange binding (tenant -> variant router).
      conversions: { scope: 'tenant', max_size: 1000, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
      reports: { scope: 'shared' },
    },
    stages: {},
  });
}

/** A binding as a comparable string: source, destination, its kind, key and arguments (keys sorted). */
function bindingKey(b: { source: string; destination: string; kind: string; key: string; args: Record<string, unknown> }): string {
  const args = Object.fromEntries(Object.entries(b.args).sort(([x], [y]) => x.localeCompare(y)));
  return JSON.stringify([b.source, b.destination, b.kind, b.key, args]);
}
const specKey = (b: BindingSpec): string =>
  bindingKey({ source: b.source, destination: b.destination, kind: b.destinationType, key: b.routingKey, args: b.arguments ?? {} });
const brokerKey = (b: BrokerBinding): string =>
  bindingKey({ source: b.source, destination: b.destination, kind: b.destination_type, key: b.routing_key, args: b.arguments });

/** What the broker holds under the prefix, by the management API (state markers apart). */
async function onBroker(config: CompiledConfig) {
  const api = new ManagementClient(config.broker.management);
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const ours = (name: string): boolean => name.startsWith(`${config.prefix}.`);
  const [queues, exchanges, bindings] = await Promise.all([api.listQueues(vhost), api.listExchangeNames(vhost), api.listBindings(vhost)]);
  return {
    queues: new Map(queues.filter((q) => ours(q.name)).map((q) => [q.name, q.arguments])),
    exchanges: new Set(exchanges.filter((name) => ours(name) && !isStateMarker(config.prefix, name))),
    markers: new Set(exchanges.filter((name) => isStateMarker(config.prefix, name))),
    bindings: new Set(bindings.filter((b) => ours(b.source)).map(brokerKey)),
  };
}

/** The tenant exchange's binding into a queue's variant router or queue: its entry. */
function entryOf(topology: Topology, names: BrokerNames, queue: string, tenant: string): BindingSpec {
  const entry = topology.bindings.find((b) => b.drainMarker === names.stateMarker('draining', queue, tenant));
  if (entry === undefined) throw new Error(`no entry for ${queue}.${tenant}`);
  return entry;
}

describe(`provision at scale (${TENANTS} tenants, real broker)`, function () {
  this.timeout(180_000);
  const configs: CompiledConfig[] = [];

  after(async () => {
    for (const config of configs) await deletePrefix(config.broker.url, config.broker.management, config.prefix);
  });

  it('declares exactly what provisionTopology lists, and leaves a draining queue’s entry unbound', async () => {
    const config = scaleConfig();
    configs.push(config);
    const names = new BrokerNames(config.prefix);
    // t007's scans drain before anything is provisioned (drain declares the queue without its entry).
    await setQueueState(config, { queue: 'scans', tenant: 't007' }, 'draining', log);
    const events: AdminEvent[] = [];
    const result = await provisionBroker(config, [], log, {
      onEvent: (event) => {
        events.push(event);
        return Promise.resolve();
      },
    });
    const topology = provisionTopology(config, []);
    expect(result.topology.queues.length).to.equal(topology.queues.length);

    const broker = await onBroker(config);
    expect([...broker.queues.keys()].sort()).to.deep.equal(topology.queues.map((q) => q.name).sort());
    for (const queue of topology.queues) expect(broker.queues.get(queue.name), queue.name).to.deep.equal(queue.arguments);
    expect([...broker.exchanges].sort()).to.deep.equal(topology.exchanges.map((e) => e.name).sort());
    const drained = entryOf(topology, names, 'scans', 't007');
    const expected = topology.bindings.filter((b) => b !== drained).map(specKey);
    expect(
      [...broker.bindings].filter((b) => !expected.includes(b)),
      'bindings nobody listed',
    ).to.deep.equal([]);
    expect(
      expected.filter((b) => !broker.bindings.has(b)),
      'bindings missing',
    ).to.deep.equal([]);
    expect(broker.bindings.has(specKey(drained)), "the draining queue's entry").to.equal(false);
    expect([...broker.markers]).to.deep.equal([names.stateMarker('draining', 'scans', 't007')]);

    // t007 was known to the broker (the drain declared its exchange); every other tenant is new.
    const announced = events.filter((e) => e.type === 'tenant.provisioned').map((e) => (e.data as { tenant: string }).tenant);
    expect(announced).to.have.length(TENANTS - 1);
    expect(announced).to.not.include('t007');
    expect(result.settings.put.length, 'the max_size policy').to.be.greaterThan(0);

    // Provisioning again declares only what is missing (the cut entry, which stays cut) and changes nothing.
    const second = await provisionBroker(config, [], log);
    expect(second.declared.exchanges).to.deep.equal([]);
    expect(second.declared.queues).to.deep.equal([]);
    expect(second.declared.bindings).to.deep.equal([drained]);
    const again = await onBroker(config);
    expect(again.bindings).to.deep.equal(broker.bindings);
    expect(again.queues.size).to.equal(broker.queues.size);
  });

  it('cuts again an entry whose drain started between its first look and its bind (the race with `stagecoach drain`)', async () => {
    const config = scaleConfig();
    configs.push(config);
    const names = new BrokerNames(config.prefix);
    const topology = provisionTopology(config, []);
    const api = new ManagementClient(config.broker.management);
    const listed = new ListedFlags(api, vhostOfAmqpUrl(config.broker.url));
    // The drain runs whole (marker put, entry unbound: nothing to unbind yet) right after the
    // first look, which therefore answers "not draining": the bind that follows reopens the entry
    // unless the second look catches it.
    let looks = 0;
    const racing: FlagReader = {
      present: async (markers) => {
        const found = await listed.present(markers);
        looks += 1;
        if (looks === 1) await setQueueState(config, { queue: 'conversions', tenant: 't123' }, 'draining', log);
        return found;
      },
      close: () => listed.close(),
    };
    const connection = await openConnection(config, log);
    try {
      await declareTopology(connection, topology, log, { lanes: PROVISION_LANES, drainMarkers: racing });
    } finally {
      await connection.close();
    }
    expect(looks).to.equal(2);
    const broker = await onBroker(config);
    expect(broker.bindings.has(specKey(entryOf(topology, names, 'conversions', 't123'))), 'the raced entry').to.equal(false);
    expect(broker.bindings.has(specKey(entryOf(topology, names, 'conversions', 't122'))), 'a neighbour’s entry').to.equal(true);
    expect(broker.bindings.size).to.equal(topology.bindings.length - 1);
  });

  it('names what the broker refused (TOPOLOGY_CONFLICT) and stops every lane', async () => {
    const config = scaleConfig();
    configs.push(config);
    const topology = provisionTopology(config, []);
    const clash = topology.queues[Math.floor(topology.queues.length / 2)];
    const connection = await openConnection(config, log);
    try {
      const channel = await connection.createChannel();
      await channel.assertQueue(clash?.name as string, { durable: false, arguments: { 'x-max-priority': 3 } });
      await channel.close();
      const err = await declareTopology(connection, topology, log, { lanes: PROVISION_LANES }).then(
        () => undefined,
        (e: unknown) => e as Error & { code?: string },
      );
      expect(err?.code).to.equal('TOPOLOGY_CONFLICT');
      expect(err?.message).to.contain(`the broker refused queue "${clash?.name}"`);
      expect(err?.message).to.contain('stagecoach plan');
      // The connection survived the refusal (it closed one lane's channel only).
      const probe = await connection.createChannel();
      await probe.close();
    } finally {
      await connection.close();
    }
  });
});

/**
 * `provision` leaves each queue's `suspect` companion to the stage that reads the queue: only a
 * running stage moves a job there. Everything a job published before any stage can reach is
 * provisioned: the queue, its `due` companion (a scheduled job comes back there) and its dead
 * letters (the broker dead-letters an expired job with no stage running).
 */
describe('provision, then jobs, then the stage', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let raw: RawBroker | undefined;
  let publisher: Publisher | undefined;
  let running: RunningGroup | undefined;

  before(() => {
    config = withTestConfig(
      { tenants: ['acme', 'globex'], queues: { work: {}, done: {} }, stages: { flaky: { module: './failure-stages.js' } } },
      path.join(here, '../fixtures/config.json'),
    );
  });

  after(async () => {
    await publisher?.close();
    await raw?.close();
    await running?.stop();
    await deletePrefix(config.broker.url, config.broker.management, config.prefix);
  });

  it('keeps every job published before the stage starts, scheduled and expired ones included; the stage declares its suspect queue', async () => {
    const names = new BrokerNames(config.prefix);
    const stages = (await loadAllStages(config)).map((s) => s.metadata);
    await provisionBroker(config, stages, log);
    raw = await RawBroker.connect(config.broker.url);
    for (const tenant of ['acme', 'globex']) {
      expect(await raw.exists(names.queue('work', tenant)), `work of ${tenant}`).to.equal(true);
      expect(await raw.exists(names.dueQueue('work', tenant)), `due of ${tenant}`).to.equal(true);
      expect(await raw.exists(names.deadQueue('work', tenant)), `dead of ${tenant}`).to.equal(true);
      expect(await raw.exists(names.suspectQueue('work', tenant)), `suspect of ${tenant}`).to.equal(false);
    }

    publisher = await Publisher.connect(config, { log });
    await publisher.publish('work', { type: 'flaky', args: ['ok', 'before-1'], tenant: 'acme' });
    await publisher.publish('work', {
      type: 'flaky',
      args: ['ok', 'before-scheduled'],
      tenant: 'acme',
      scheduled_at: new Date(Date.now() + 1500).toISOString(),
    });
    await publisher.publish('work', { type: 'flaky', args: ['ok', 'before-expired'], tenant: 'globex', enqueue_ttl: 'PT1S' });
    // The scheduled job is back from the delay ladder in `due`, the expired one in globex's dead letters.
    await waitFor('the scheduled job in due', async () => (await raw?.count(names.dueQueue('work', 'acme'))) === 1, 15_000);
    await waitFor('the expired job in dead letters', async () => (await raw?.count(names.deadQueue('work', 'globex'))) === 1, 15_000);
    expect(await raw.count(names.queue('work', 'acme'))).to.equal(1);
    expect(await raw.count(names.unroutable)).to.equal(0);

    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    await waitFor('both jobs of acme run', async () => (await raw?.count(names.queue('done', 'acme'))) === 2, 15_000);
    // Declared by the stage before it consumed, with the ladder's binding that brings suspects back.
    expect(await raw.exists(names.suspectQueue('work', 'acme'))).to.equal(true);
    const suspect = delayDeliveryBinding(config, names.suspectQueue('work', 'acme'));
    const bindings = await new ManagementClient(config.broker.management).listBindings(vhostOfAmqpUrl(config.broker.url));
    expect(bindings.map(brokerKey)).to.include(specKey(suspect));
    expect(await raw.exists(names.suspectQueue('work', 'globex')), 'no stage of globex ran').to.equal(false);
  });
});
