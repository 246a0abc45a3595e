import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Tracker } from '../../src/tracker/tracker.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { retentionOf } from '../../src/job-state/create-job-store.js';
import type { JobStore } from '../../src/job-state/job-store.js';
import { MemoryJobStore } from '../../src/job-state/memory-job-store.js';
import { PostgresJobStore } from '../../src/job-state/postgres-job-store.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { issueCredentials, provisionBrokerUsers } from '../../src/security/tenant-users.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const SOURCE = path.join(here, '../fixtures/config.json');
const PG = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const log = createLogger({ test: 'tenant-job-store' }, 'error');
const TENANT_USERS_CONFIG: RawConfig = {
  security: { tenantUsers: true },
  tenants: ['acme', 'globex'],
  queues: { in: {}, out: {} },
  stages: { relay: { module: './test-stages.js' } },
};

/**
 * With broker-enforced tenant users, a tenant's producer chooses its jobs' ids and batch ids: one
 * equal to another tenant's must not reach that tenant's job or batch. Both job stores, each
 * behind a tracker reading the real stream, keep the job the first tenant reported and refuse the
 * other's records; each tenant's batch of one id is its own.
 */
describe("ids a tenant's producer chooses (security.tenantUsers)", function () {
  this.timeout(90_000);
  let config: CompiledConfig;
  let stages: LoadedStage[];
  let api: ManagementClient;
  let users: string[] = [];
  let raw: RawBroker;
  let globexRelay: StageGroup;
  let acme: Publisher;
  let globex: Publisher;
  const trackers: Tracker[] = [];
  let postgres: PostgresJobStore;

  const asUser = (amqpUrl: string): CompiledConfig =>
    compileConfig({ ...TENANT_USERS_CONFIG, prefix: config.prefix, durable: false, broker: { url: amqpUrl } }, SOURCE);

  before(async () => {
    config = withTestConfig(TENANT_USERS_CONFIG, SOURCE);
    stages = await loadAllStages(config);
    await declareTopologyOnce(
      config,
      provisionTopology(
        config,
        stages.map((s) => s.metadata),
      ),
      log,
    );
    api = new ManagementClient(config.broker.management);
    users = await provisionBrokerUsers(config, api, config.tenants);
    const url = (user: string): Promise<string> => issueCredentials(config, api, `${config.prefix}.${user}`);
    acme = await Publisher.connect(asUser(await url('producer.acme')), { log });
    globex = await Publisher.connect(asUser(await url('producer.globex')), { log });
    // Only globex's relay runs: acme's job stays waiting in acme's queue.
    const relay = stages.find((s) => s.metadata.name === 'relay') as LoadedStage;
    globexRelay = new StageGroup(asUser(await url('stage.globex')), [{ stage: relay, tenant: 'globex' }], log);
    await globexRelay.start();
    raw = await RawBroker.connect(config.broker.url);
    postgres = new PostgresJobStore(PG, `jobs_tjs_${randomBytes(4).toString('hex')}`, retentionOf(config));
    for (const jobs of [new MemoryJobStore(retentionOf(config)), postgres]) {
      trackers.push(await Tracker.start(config, { log, jobs, announce: false }));
    }
  });

  after(async () => {
    for (const tracker of trackers) await tracker.close();
    await postgres?.drop().catch(() => undefined);
    await globexRelay?.stop();
    await acme?.close();
    await globex?.close();
    await raw?.close();
    for (const user of users) await api.deleteUser(user);
    if (config) await teardown(config, stages?.map((s) => s.metadata) ?? []);
  });

  it("job store: keeps acme's job as acme's when globex's producer publishes and runs a job of the same id: globex's records are refused and counted", async () => {
    const own = acme.build('in', { type: 'relay.me', args: ['acme-own'], tenant: 'acme' });
    await acme.send(own);
    for (const tracker of trackers) {
      await waitFor("acme's job in the store", async () => {
        await tracker.sync();
        return (await (tracker.jobs as JobStore).get(own.id))?.tenant === 'acme';
      });
    }

    // globex's job under acme's id, run to completion by globex's own relay.
    const same: Job = { ...globex.build('in', { type: 'relay.me', args: ['globex-same-id'], tenant: 'globex' }), id: own.id };
    await globex.send(same);
    const out = new BrokerNames(config.prefix).queue('out', 'globex');
    const relayed = await waitFor(`globex's relay output in ${out}`, async () => {
      const messages = await raw.drain(out);
      return messages.find((m) => (JSON.parse(m.content.toString()) as Job).args[0] === 'globex-same-id@globex');
    });
    const child = (JSON.parse(relayed.content.toString()) as Job).id;

    for (const tracker of trackers) {
      const store = tracker.jobs as JobStore;
      await waitFor("globex's child in the store", async () => {
        await tracker.sync();
        return (await store.get(child)) !== undefined;
      });
      const row = await store.get(own.id);
      expect(row, store.constructor.name).to.deep.include({ tenant: 'acme', state: 'available', queue: 'in', attempt: 1, children: [] });
      expect(row, store.constructor.name).to.not.have.any.keys('stage', 'started_at', 'completed_at', 'result');
      // A read confined to globex never shows acme's job; globex's own child is globex's.
      const globexIds = (await store.list({ tenant: 'globex' }, { limit: 1000 })).jobs.map((job) => job.id);
      expect(globexIds, store.constructor.name).to.include(child).and.not.include(own.id);
      expect((await store.list({ tenant: 'acme' }, { limit: 1000 })).jobs.map((job) => job.id)).to.deep.equal([own.id]);
      // globex's created, started and completed records of that id.
      expect(store.foreign.count, store.constructor.name).to.equal(3);
    }
  });

  it("batches: a batch id globex's producer used first is acme's own batch too; neither counts or refuses the other's jobs", async () => {
    const first = await globex.publish('in', { type: 'relay.me', args: ['globex-batched'], tenant: 'globex', batch: 'tu-shared' });
    const second = await acme.publish('in', { type: 'relay.me', args: ['acme-batched'], tenant: 'acme', batch: 'tu-shared' });
    const tracker = trackers[0] as Tracker;
    const [ours, theirs] = await waitFor('both batches', async () => {
      await tracker.sync();
      const found = [tracker.batch('tu-shared', 'acme'), tracker.batch('tu-shared', 'globex')];
      return found[0]?.counts.known === 1 && tracker.fold.job(first)?.cls === 'completed' ? found : undefined;
    });
    expect(ours).to.deep.include({ id: 'tu-shared', tenant: 'acme', refused: 0 });
    expect(ours?.counts).to.include({ known: 1, in_flight: 1 });
    expect(tracker.fold.job(second)).to.include({ tenant: 'acme', cls: 'in_flight', batchKey: ours?.key });
    expect(theirs).to.deep.include({ id: 'tu-shared', tenant: 'globex', refused: 0 });
    expect(tracker.fold.job(first)).to.include({ tenant: 'globex', batchKey: theirs?.key });
  });
});
