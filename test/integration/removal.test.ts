import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import type { GetMessage } from 'amqplib';
import type { RawConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { pauseTenant } from '../../src/directives/batch-directives.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { teardown } from '../../src/testing/test-config.js';
import { openConnection } from '../../src/broker/amqp-connection.js';
import { bucketQueues, bucketsOf, type Bucket } from '../../src/flow/bucket.js';
import { BucketKeeper } from '../../src/flow/bucket-keeper.js';
import { delayRoutingKey } from '../../src/topology/delay-topology.js';
import { finished, REPO_ROOT, runCli, spawnCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'removal' }, 'error');
const TEST_STAGES = path.join(REPO_ROOT, 'dist/test/fixtures/test-stages.js');
const RELAY = [{ name: 'relay', input: 'in', outputs: ['out'] }];
const env = { AMQP_URL };
const body = (message: GetMessage): Job => JSON.parse(message.content.toString()) as Job;

async function rewrite(file: string, change: (raw: RawConfig) => void): Promise<void> {
  const raw = JSON.parse(await readFile(file, 'utf8')) as RawConfig;
  change(raw);
  await writeFile(file, JSON.stringify(raw));
}

/**
 * Provisioned for four tenants and a `legacy` queue; then the configuration drops globex,
 * initech, hooli and `legacy`, as an operator does before removing them from the broker.
 */
describe('tenant retire and queue delete, with the reject, discard and move strategies', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let publisher: Publisher;
  const tenants = ['acme', 'globex', 'initech', 'hooli', 'wayne'];

  before(async () => {
    project = await writeConfigFile(
      {
        tenants,
        queues: { in: {}, out: {}, archive: { scope: 'shared' }, legacy: {} },
        stages: { relay: { module: TEST_STAGES } },
      },
      RELAY,
      'removal',
    );
    publisher = await Publisher.connect(project.config, { log });
    await rewrite(project.file, (c) => {
      c.tenants = ['acme'];
      delete c.queues?.legacy;
    });
  });

  after(async () => {
    await publisher?.close();
    // The provisioning configuration's topology: whatever a failed test left too.
    await project?.remove();
  });

  /**
   * Four jobs of `tenant`: the first in its `due` queue (as a hand-back puts it there), the second
   * dead-lettered by the broker, the last two waiting in the main queue.
   */
  async function fill(tenant: string): Promise<string[]> {
    const { raw, names } = project;
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await publisher.publish('in', { type: 't', args: [`${tenant}-${i}`], tenant }));
    const first = await raw.takeOne(names.queue('in', tenant));
    if (first === undefined) throw new Error('no job to hand back');
    await raw.publish('', names.dueQueue('in', tenant), first.content, first.properties);
    await raw.reject(names.queue('in', tenant));
    await waitFor('the dead letter', async () => (await raw.count(names.deadQueue('in', tenant))) === 1);
    return ids;
  }

  it('refuses a tenant still configured, a tenant-scoped move target and a missing --target (exit 2), and a tenant whose stage runs (exit 1)', async () => {
    const { file } = project;
    const configured = await runCli(['tenant', 'retire', 'acme', '--strategy', 'discard', '--config', file], env);
    expect(configured.code).to.equal(2);
    expect(configured.stderr).to.contain('tenant "acme" is configured');
    const scoped = await runCli(['tenant', 'retire', 'globex', '--strategy', 'move', '--target', 'in', '--config', file], env);
    expect(scoped.code).to.equal(2);
    expect(scoped.stderr).to.contain("a retired tenant's jobs move to a shared queue only");
    expect((await runCli(['tenant', 'retire', 'globex', '--strategy', 'move', '--config', file], env)).code).to.equal(2);
    expect((await runCli(['tenant', 'retire', 'globex', '--strategy', 'later', '--config', file], env)).code).to.equal(2);

    const stage = spawnCli(['run', 'relay', '--tenant', 'hooli', '--config', file], env);
    try {
      await waitFor('the hooli relay consuming', () => stage.err.includes('"state":"running"'), 20_000);
      const running = await runCli(['tenant', 'retire', 'hooli', '--strategy', 'discard', '--config', file], env);
      expect(running.code).to.equal(1);
      expect(running.stderr).to.match(/has 1 consumer: stop the stages reading it first/);
      expect(await project.raw.exchangeExists(project.names.tenantExchange('hooli')), 'nothing removed').to.equal(true);
    } finally {
      stage.kill('SIGTERM');
      await finished(stage, 30_000, 'run relay');
    }
  });

  it('reject refuses a tenant with jobs, lists the count per queue and the ids of its dead letters, and removes nothing', async () => {
    const { file, names, raw } = project;
    await fill('globex');
    const refused = await runCli(['tenant', 'retire', 'globex', '--strategy', 'reject', '--config', file], env);
    expect(refused.code, refused.stderr).to.equal(1);
    const lines = refused.stdout.split('\n');
    expect(lines[0]).to.equal('refused: tenant globex still holds jobs (4 jobs remain); nothing was removed');
    expect(lines).to.include(`  kept     ${names.queue('in', 'globex')}: 2 jobs`);
    expect(lines).to.include(`  kept     ${names.dueQueue('in', 'globex')}: 1 job`);
    const dead = lines.find((line) => line.startsWith(`  kept     ${names.deadQueue('in', 'globex')}: 1 job, ids `));
    expect(dead, refused.stdout).to.be.a('string');
    expect(await raw.count(names.queue('in', 'globex'))).to.equal(2);
    expect(await raw.exchangeExists(names.tenantExchange('globex'))).to.equal(true);

    const json = await runCli(['tenant', 'retire', 'globex', '--strategy', 'reject', '--json', '--config', file], env);
    const result = JSON.parse(json.stdout) as { removed: boolean; queues: Array<{ name: string; jobs: number }> };
    expect(result.removed).to.equal(false);
    expect(result.queues.reduce((sum, q) => sum + q.jobs, 0)).to.equal(4);
  });

  it('discard removes everything of the tenant, counting what it dropped; run refuses it after, and its jobs (published or delayed) land in unroutable', async () => {
    const { file, names, raw } = project;
    const before = (await raw.count(names.unroutable)) ?? 0;
    // Its queue states go with it (their markers end in `.globex` too, checked below).
    await setQueueState(project.config, { queue: 'in', tenant: 'globex' }, 'paused', log);
    expect(await raw.exchangeExists(`${names.prefix}.state.paused.in.globex`)).to.equal(true);
    // A retry waiting 8 s on the delay ladder for globex's due queue, which is gone when it is
    // due (the retirement below must take less than that, even on a loaded machine).
    await raw.publish(names.retry, delayRoutingKey(8000, names.dueQueue('in', 'globex')), JSON.stringify({ waiting: true }));
    const discarded = await runCli(['tenant', 'retire', 'globex', '--strategy', 'discard', '--config', file], env);
    expect(discarded.code, discarded.stderr).to.equal(0);
    expect(discarded.stdout).to.contain('removed tenant globex (strategy discard)');
    expect(discarded.stdout).to.contain(`  deleted  ${names.queue('in', 'globex')}: 2 jobs, 2 discarded`);
    expect(discarded.stdout).to.contain(`  deleted  ${names.deadQueue('in', 'globex')}: 1 job, 1 discarded`);
    expect(discarded.stdout).to.contain(`  deleted  exchange ${names.tenantExchange('globex')}`);
    for (const queue of ['in', 'out', 'legacy']) {
      for (const name of [
        names.queue(queue, 'globex'),
        names.dueQueue(queue, 'globex'),
        names.suspectQueue(queue, 'globex'),
        names.deadQueue(queue, 'globex'),
      ]) {
        expect(await raw.exists(name), name).to.equal(false);
      }
    }
    const inventory = await new ManagementClient(project.config.broker.management).listExchanges('/');
    expect(inventory.map((e) => e.name).filter((name) => name.startsWith(`${names.prefix}.`) && name.endsWith('.globex'))).to.deep.equal(
      [],
    );

    const run = await runCli(['run', 'relay', '--tenant', 'globex', '--config', file], env);
    expect(run.code).to.equal(2);
    expect(run.stderr).to.contain('tenant "globex" is neither configured');
    const late = await publisher.publish('in', { type: 't', args: ['late'], tenant: 'globex' }).catch((err: unknown) => err);
    expect(late, 'a retired tenant is not provisioned any more').to.include({ code: 'UNROUTABLE', reason: 'tenant-not-provisioned' });
    await waitFor(
      'the late job and the delayed one kept in unroutable',
      async () => (await raw.count(names.unroutable)) === before + 2,
      15_000,
    );
    await raw.drain(names.unroutable);

    const again = await runCli(['tenant', 'retire', 'globex', '--strategy', 'discard', '--config', file], env);
    expect(again.code, 'nothing left to retire').to.equal(1);
  });

  it('move sends every job of the tenant to a shared queue, keeping its tenant, dead letters to its dead letters, then removes the tenant', async () => {
    const { file, names, raw } = project;
    const ids = await fill('initech');
    const moved = await runCli(['tenant', 'retire', 'initech', '--strategy', 'move', '--target', 'archive', '--config', file], env);
    expect(moved.code, moved.stderr + moved.stdout).to.equal(0);
    expect(moved.stdout).to.contain(`  deleted  ${names.queue('in', 'initech')}: 2 jobs, 2 moved`);
    expect(moved.stdout).to.contain(`  deleted  ${names.dueQueue('in', 'initech')}: 1 job, 1 moved`);
    const archived = await raw.drain(names.queue('archive'));
    expect(archived.map((m) => body(m).id).sort()).to.deep.equal([ids[0], ids[2], ids[3]].sort());
    for (const message of archived) {
      expect(body(message)).to.include({ queue: 'archive', tenant: 'initech' });
      expect(message.properties.headers).to.include({ 'x-ojs-queue': 'archive', 'x-ojs-tenant': 'initech' });
    }
    const [dead] = await raw.drain(names.deadQueue('archive'));
    expect(body(dead)).to.include({ id: ids[1], queue: 'archive', tenant: 'initech' });
    expect(dead.properties.headers?.['x-death'], 'the cause of death travels with it').to.be.an('array');
    expect(await raw.exchangeExists(names.tenantExchange('initech'))).to.equal(false);
  });

  it('refuses a tenant with parked jobs until a resume sends them back to its queues, and lifts its pause with the retirement', async () => {
    const { file, names, raw, config } = project;
    await pauseTenant(config, 'wayne', log);
    // A stage meets a job of the paused tenant and parks it, as Settlement does: byte for byte to
    // the park exchange under its tenant, with the queue resume sends it back to.
    const id = await publisher.publish('in', { type: 't', args: ['parked'], tenant: 'wayne' });
    const met = await raw.takeOne(names.queue('in', 'wayne'));
    if (met === undefined) throw new Error('no job to park');
    const headers = { ...met.properties.headers, 'x-ojs-parked-by': 'tenant', 'x-ojs-parked-return': names.dueQueue('in', 'wayne') };
    await raw.publish(names.park, 'wayne', met.content, { ...met.properties, headers });
    await waitFor('the job parked', async () => (await raw.count(names.parked)) === 1);

    for (const strategy of ['reject', 'discard']) {
      const refused = await runCli(['tenant', 'retire', 'wayne', '--strategy', strategy, '--config', file], env);
      expect(refused.code, refused.stderr).to.equal(1);
      expect(refused.stderr).to.contain('tenant "wayne" has 1 parked job (held by a tenant or batch pause), outside its queues');
      expect(refused.stderr).to.contain('stagecoach tenant resume wayne');
    }
    expect(await raw.exchangeExists(names.tenantExchange('wayne')), 'nothing removed').to.equal(true);
    expect(await raw.count(names.parked), 'the parked job untouched').to.equal(1);

    expect((await runCli(['tenant', 'resume', 'wayne', '--config', file], env)).code).to.equal(0);
    await waitFor('the parked job back in its due queue', async () => (await raw.count(names.dueQueue('in', 'wayne'))) === 1);
    // Paused again, with nothing parked: the retirement goes ahead, its strategy takes the job, and the pause ends with it.
    await pauseTenant(config, 'wayne', log);
    const retired = await runCli(['tenant', 'retire', 'wayne', '--strategy', 'move', '--target', 'archive', '--config', file], env);
    expect(retired.code, retired.stderr + retired.stdout).to.equal(0);
    expect(retired.stdout).to.contain(`  deleted  ${names.dueQueue('in', 'wayne')}: 1 job, 1 moved`);
    expect(retired.stdout).to.contain('  resumed  the tenant pause (nothing parks its jobs any more)');
    expect(await raw.exchangeExists(names.tenantPauseMarker('wayne'))).to.equal(false);
    const [archived] = await raw.drain(names.queue('archive'));
    expect(body(archived)).to.include({ id, tenant: 'wayne' });
  });

  it('queue delete: refuses a configured queue; reject lists, discard counts, move sends each tenant its own jobs', async () => {
    const { file, names, raw } = project;
    const configured = await runCli(['queue', 'delete', 'in', '--strategy', 'discard', '--config', file], env);
    expect(configured.code).to.equal(2);
    expect(configured.stderr).to.contain('queue "in" is still configured');

    await publisher.publish('legacy', { type: 't', args: ['acme-legacy'], tenant: 'acme' });
    const hooliJob = await publisher.publish('legacy', { type: 't', args: ['hooli-legacy'], tenant: 'hooli' });
    const refused = await runCli(['queue', 'delete', 'legacy', '--strategy', 'reject', '--config', file], env);
    expect(refused.code).to.equal(1);
    expect(refused.stdout).to.contain(`  kept     ${names.queue('legacy', 'acme')}: 1 job`);
    expect(refused.stdout).to.contain(`  kept     ${names.queue('legacy', 'hooli')}: 1 job`);

    // A job parked by a pause, to come back to hooli's legacy queue: the queue is not deleted from under it.
    await raw.publish(names.park, 'hooli', JSON.stringify({ parked: true }), {
      headers: { 'x-ojs-parked-by': 'tenant', 'x-ojs-parked-return': names.dueQueue('legacy', 'hooli') },
    });
    await waitFor('the job parked', async () => (await raw.count(names.parked)) === 1);
    const held = await runCli(['queue', 'delete', 'legacy', '--tenant', 'hooli', '--strategy', 'discard', '--config', file], env);
    expect(held.code, held.stderr).to.equal(1);
    expect(held.stderr).to.contain('queue "legacy" of tenant "hooli" has 1 parked job to come back to it');
    expect(await raw.count(names.queue('legacy', 'hooli')), 'nothing removed').to.equal(1);
    expect(await raw.drain(names.parked)).to.have.length(1);

    // hooli's by discard, for hooli only.
    const discarded = await runCli(['queue', 'delete', 'legacy', '--tenant', 'hooli', '--strategy', 'discard', '--config', file], env);
    expect(discarded.code, discarded.stderr).to.equal(0);
    expect(discarded.stdout).to.contain(`  deleted  ${names.queue('legacy', 'hooli')}: 1 job, 1 discarded`);
    expect(await raw.exists(names.queue('legacy', 'hooli'))).to.equal(false);
    // The job store knows it went: discarded, saying why, not still `available`.
    const status = await runCli(['job', 'status', hooliJob, '--json', '--config', file], env);
    expect(status.code, status.stderr).to.equal(0);
    const shown = JSON.parse(status.stdout) as { state: string; errors: Array<{ type: string }> };
    expect(shown.state).to.equal('discarded');
    expect(shown.errors.map((e) => e.type)).to.deep.equal(['QUEUE_DELETED']);
    expect(await raw.exists(names.queue('legacy', 'acme'))).to.equal(true);

    // The rest (acme's) to `in`, each tenant's own.
    const moved = await runCli(['queue', 'delete', 'legacy', '--strategy', 'move', '--target', 'in', '--config', file], env);
    expect(moved.code, moved.stderr + moved.stdout).to.equal(0);
    const [job] = await raw.drain(names.queue('in', 'acme'));
    expect(body(job)).to.include({ queue: 'in', tenant: 'acme' });
    expect(body(job).args).to.deep.equal(['acme-legacy']);
    expect(await raw.exists(names.queue('legacy', 'acme'))).to.equal(false);
    expect(await raw.exists(names.deadQueue('legacy', 'acme'))).to.equal(false);
    const policies = await new ManagementClient(project.config.broker.management).listPolicies('/');
    expect(policies.map((p) => p.name).filter((name) => name.startsWith(`${names.prefix}.`) && name.includes('.legacy'))).to.deep.equal([]);
    // Nothing else of acme was touched.
    expect(await raw.exchangeExists(names.tenantExchange('acme'))).to.equal(true);
  });

  it("move never carries a job into another tenant's name: it keeps it, removes nothing of the queue, and discard finishes", async () => {
    const { file, names, raw } = project;
    const own = await publisher.publish('in', { type: 't', args: ['hooli-own'], tenant: 'hooli' });
    // A job naming acme, slipped into hooli's queue.
    const foreign = await publisher.publish('out', { type: 't', args: ['claims-acme'], tenant: 'acme' });
    const message = await raw.takeOne(names.queue('out', 'acme'));
    if (message === undefined) throw new Error('no foreign job');
    await raw.publish('', names.queue('in', 'hooli'), message.content, message.properties);

    const moved = await runCli(['tenant', 'retire', 'hooli', '--strategy', 'move', '--target', 'archive', '--config', file], env);
    expect(moved.code).to.equal(1);
    expect(moved.stdout).to.contain('tenant hooli not completely removed');
    expect(moved.stdout).to.contain(
      `  kept     ${names.queue('in', 'hooli')}: 2 jobs, 1 moved, 1 kept (${foreign}: it names tenant "acme", not "hooli")`,
    );
    const archived = await raw.drain(names.queue('archive'));
    expect(archived.map((m) => body(m).id)).to.deep.equal([own]);
    expect(await raw.count(names.queue('in', 'acme')), 'nothing reached acme').to.equal(0);

    const discarded = await runCli(['tenant', 'retire', 'hooli', '--strategy', 'discard', '--config', file], env);
    expect(discarded.code, discarded.stdout).to.equal(0);
    expect(discarded.stdout).to.contain(`  deleted  ${names.queue('in', 'hooli')}: 1 job, 1 discarded`);
    expect(await raw.exists(names.queue('in', 'hooli'))).to.equal(false);
  });
});

describe('tenant retire with broker-enforced tenants', function () {
  this.timeout(60_000);
  let project: ConfigFile;

  before(async () => {
    project = await writeConfigFile({ security: { tenantUsers: true }, tenants: ['hooli'], queues: { in: {} } }, [], 'retire-users');
  });

  after(async () => {
    const api = new ManagementClient(project.config.broker.management);
    for (const user of [
      `${project.names.prefix}.producer.hooli`,
      `${project.names.prefix}.stage.hooli`,
      project.config.security.internalUser,
    ]) {
      await api.deleteUser(user);
    }
    await teardown(await loadConfig(project.file, env));
    await project.remove();
  });

  it("deletes the tenant's broker users with its queues", async () => {
    const { file, names } = project;
    const provisioned = await runCli(['provision', '--config', file], env);
    expect(provisioned.code, provisioned.stderr).to.equal(0);
    const api = new ManagementClient(project.config.broker.management);
    expect(await api.userExists(`${names.prefix}.producer.hooli`)).to.equal(true);
    await rewrite(file, (c) => void (c.tenants = []));
    const retired = await runCli(['tenant', 'retire', 'hooli', '--strategy', 'reject', '--config', file], env);
    expect(retired.code, retired.stderr + retired.stdout).to.equal(0);
    expect(retired.stdout).to.contain(`  deleted  broker user ${names.prefix}.producer.hooli`);
    expect(await api.userExists(`${names.prefix}.producer.hooli`)).to.equal(false);
    expect(await api.userExists(`${names.prefix}.stage.hooli`)).to.equal(false);
    expect(await api.userExists(project.config.security.internalUser), 'the internal user serves every tenant').to.equal(true);
  });
});

describe('tenant retire and queue delete remove the flow-limit queues of what they remove', function () {
  this.timeout(60_000);
  let project: ConfigFile;

  before(async () => {
    project = await writeConfigFile({ tenants: ['acme', 'globex'], queues: { in: {}, legacy: {} } }, [], 'removal-flow');
  });

  after(async () => {
    await teardown(await loadConfig(project.file, env));
    await project.remove();
  });

  it("deletes a tenant's queue limits and its shares of per-tenant limits, a queue's limits; shared limits and other tenants' stay", async () => {
    const { file, names, raw } = project;
    const window = { limit: 5, periodMs: 1000 };
    const buckets = {
      globexQueue: bucketsOf(`queue:${names.queue('in', 'globex')}`, { concurrency: 3 }),
      globexShare: bucketsOf('ocr@globex', { rate: window }),
      acmeShare: bucketsOf('ocr@acme', { rate: window }),
      shared: bucketsOf('ocr', { concurrency: 20 }),
      acmeLegacy: bucketsOf(`queue:${names.queue('legacy', 'acme')}`, { concurrency: 2 }),
    };
    const connection = await openConnection(project.config, log, 'removal-flow-test');
    try {
      const keeper = new BucketKeeper(connection, { prefix: names.prefix, durable: false, log });
      for (const bucket of Object.values(buckets).flat()) await keeper.declare(bucket);
    } finally {
      await connection.close();
    }
    const queuesOf = (list: Bucket[]): string[] =>
      list.flatMap((bucket) =>
        Object.values(bucketQueues(names.prefix, bucket)).filter((name): name is string => name !== undefined && !name.endsWith('.lock')),
      );
    const exist = async (list: Bucket[]): Promise<boolean[]> => Promise.all(queuesOf(list).map((name) => raw.exists(name)));
    expect(await exist(Object.values(buckets).flat())).to.not.include(false);

    await rewrite(file, (c) => {
      c.tenants = ['acme'];
      delete c.queues?.legacy;
    });
    const retired = await runCli(['tenant', 'retire', 'globex', '--strategy', 'discard', '--config', file], env);
    expect(retired.code, retired.stderr).to.equal(0);
    for (const name of queuesOf([...buckets.globexQueue, ...buckets.globexShare]))
      expect(retired.stdout).to.contain(`  deleted  flow queue ${name}`);
    expect(await exist([...buckets.globexQueue, ...buckets.globexShare])).to.not.include(true);
    expect(await exist([...buckets.acmeShare, ...buckets.shared, ...buckets.acmeLegacy])).to.not.include(false);

    const deleted = await runCli(['queue', 'delete', 'legacy', '--strategy', 'discard', '--config', file], env);
    expect(deleted.code, deleted.stderr).to.equal(0);
    expect(await exist(buckets.acmeLegacy)).to.not.include(true);
    expect(await exist([...buckets.acmeShare, ...buckets.shared])).to.not.include(false);
  });
});
