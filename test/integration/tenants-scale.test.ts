import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { retireTenant } from '../../src/removal/retire-tenant.js';
import { openConnection } from '../../src/broker/amqp-connection.js';
import { publishControl } from '../../src/control/send-control.js';
import { EventPublisher } from '../../src/events/event-publisher.js';
import { createLogger } from '../../src/logging/logger.js';
import { provisionBroker } from '../../src/plan/provision-broker.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { vhostOfAmqpUrl } from '../../src/security/broker-users.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { BrokerNames, parseBrokerName } from '../../src/topology/names.js';
import { finished, REPO_ROOT, spawnCli } from '../helpers/cli.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { pipelineQueues } from '../helpers/example-pipeline.js';

const TENANTS = 2000;
const SAMPLED = 50;
const RETIRED = 100;
const MANAGEMENT = process.env.STAGECOACH_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672/';
const log = createLogger({ test: 'tenants-scale' }, 'error');
const tenantName = (i: number): string => `t${String(i).padStart(4, '0')}`;

/** `count` distinct tenants drawn at random from `from`. */
function draw(from: readonly string[], count: number): string[] {
  const pool = [...from];
  for (let i = pool.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [pool[i], pool[j]] = [pool[j] as string, pool[i] as string];
  }
  return pool.slice(0, count);
}

/**
 * The example pipeline's shape (config/pipeline.json): `conversions` (tenant-scoped, with a
 * `pdf` variant) and `representations` (tenant-scoped), the shared `scan-specs` and `matches`;
 * the converter is the pooled stage. No tenant is configured: they are provisioned, as a SaaS
 * adds its customers (`provision --tenant T`), so that `tenant retire` may remove them.
 */
function pipelineShape(prefix: string, queues: NonNullable<RawConfig['queues']>): RawConfig {
  return {
    prefix,
    broker: { url: AMQP_URL, management: MANAGEMENT },
    durable: false,
    tenants: [],
    queues,
    stages: { converter: { module: path.join(REPO_ROOT, 'dist/stages/converter.stage.js'), concurrency: 8 } },
  };
}

/** The JSON log lines of a process's stderr with the given message. */
function logLines(stderr: string, message: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((line) => line.includes(`"message":"${message}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/**
 * Issue 27 at CI size: 2,000 provisioned tenants of the example pipeline, one pooled
 * `run converter --all-tenants` process (a child, as deployed) serving all of them, jobs of 50
 * random tenants done, then 100 tenants retired while it runs: it keeps serving the others, and
 * nothing of the retired ones is left on the broker.
 */
describe(`${TENANTS} tenants of the example pipeline, one pooled --all-tenants process (real broker)`, function () {
  // Provision, start and 100 retirements take about 2 minutes on a quiet 2-core machine.
  this.timeout(600_000);
  const tenants = Array.from({ length: TENANTS }, (_, i) => tenantName(i));
  let dir: string;
  let pipeline: NonNullable<RawConfig['queues']>;
  let config: CompiledConfig;
  let names: BrokerNames;
  let api: ManagementClient;
  let raw: RawBroker | undefined;
  let publisher: Publisher | undefined;
  let child: ReturnType<typeof spawnCli> | undefined;

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-tenants-scale-'));
    const file = path.join(dir, 'stagecoach.json');
    pipeline = await pipelineQueues();
    await writeFile(file, JSON.stringify(pipelineShape(`test-${randomBytes(4).toString('hex')}`, pipeline)));
    config = await loadConfig(file, { AMQP_URL });
    names = new BrokerNames(config.prefix);
    api = new ManagementClient(config.broker.management, 120_000);
  });

  after(async () => {
    await publisher?.close().catch(() => undefined);
    await raw?.close().catch(() => undefined);
    if (child !== undefined && child.exitCode === null) {
      child.kill('SIGTERM');
      await finished(child, 60_000, 'run converter --all-tenants').catch(() => child?.kill('SIGKILL'));
    }
    await deletePrefix(config.broker.url, config.broker.management, config.prefix);
    await rm(dir, { recursive: true, force: true });
  });

  /** Publishes a text document for `tenant` and waits until the converter's output is in its `representations` queue. */
  async function convertedFor(tenant: string, expected: number): Promise<void> {
    await publisher?.publish('conversions', {
      type: 'doc.convert',
      args: [{ base64: Buffer.from(`hello ${tenant}`).toString('base64') }, `${tenant}.txt`],
      tenant,
      headers: { mime: 'text/plain' },
    });
    await waitFor(
      `${tenant}'s document converted`,
      async () => (await raw?.count(names.queue('representations', tenant))) === expected,
      20_000,
    );
  }

  it('provisions them, serves them all, and keeps serving while 100 are retired', async () => {
    const stages = (await loadAllStages(config)).map((stage) => stage.metadata);
    // What `stagecoach provision` runs, under a configuration that lists every tenant.
    const listing = compileConfig({ ...pipelineShape(config.prefix, pipeline), tenants }, config.source);
    let started = Date.now();
    await provisionBroker(listing, stages, log);
    const provisionSeconds = (Date.now() - started) / 1000;

    started = Date.now();
    child = spawnCli(['run', 'converter', '--all-tenants', '--config', config.source, '--http-port', '0']);
    const consuming = await waitFor(
      'the pooled process consuming',
      () =>
        logLines(child?.err ?? '', 'tenants consuming')[0] ?? (child?.exitCode === null ? false : Promise.reject(new Error(child?.err))),
      180_000,
      200,
    );
    const startSeconds = (Date.now() - started) / 1000;
    expect(consuming.tenants, 'tenants served at start').to.equal(TENANTS);

    raw = await RawBroker.connect(config.broker.url);
    publisher = await Publisher.connect(config, { log });
    // One at a time, each awaited: a tenant the process did not serve fails here, by name.
    started = Date.now();
    for (const tenant of draw(tenants, SAMPLED)) await convertedFor(tenant, 1);
    const jobsSeconds = (Date.now() - started) / 1000;

    // As documented for a running process (docs/cli.md): `stagecoach terminate
    // --tenant T` releases T from it, then `stagecoach tenant retire T` removes it (refused
    // while a consumer reads its queues); 100 tenants, while the process serves the others.
    const retired = draw(tenants, RETIRED);
    const gone = new Set(retired);
    started = Date.now();
    const control = await openConnection(config, log, 'tenants-scale-test');
    try {
      for (const tenant of retired) await publishControl(control, config, { command: 'terminate', tenant });
    } finally {
      await control.close();
    }
    await waitFor(
      'every terminated tenant released',
      () => new Set(logLines(child?.err ?? '', 'tenant removed').map((line) => line.tenant)).size >= RETIRED,
      60_000,
      200,
    );
    const released = new Set(logLines(child.err, 'tenant removed').map((line) => line.tenant as string));
    expect([...released].sort()).to.deep.equal([...gone].sort());
    expect(logLines(child.err, 'tenant removed').at(-1)?.tenants, 'tenants served after the releases').to.equal(TENANTS - RETIRED);
    const events = new EventPublisher(config, { source: 'stagecoach/test', log });
    try {
      for (const tenant of retired) {
        const retirement = await retireTenant(config, tenant, log, { strategy: 'discard', api, onEvent: events.sink });
        expect(retirement.removed, tenant).to.equal(true);
      }
    } finally {
      await events.close();
    }
    const retireSeconds = (Date.now() - started) / 1000;

    // Still serving the others: a remaining tenant's job done after the retirements.
    const remaining = tenants.filter((tenant) => !gone.has(tenant));
    for (const tenant of draw(remaining, 3)) {
      const before = (await raw.count(names.queue('representations', tenant))) ?? 0;
      await convertedFor(tenant, before + 1);
    }
    expect(child.exitCode, child.err.slice(-2000)).to.equal(null);
    expect(logLines(child.err, 'tenant released: its queue cannot be consumed'), 'released by terminate, not by a failure').to.deep.equal(
      [],
    );
    // The retirements' `tenant.retired` events do not bring a released tenant back, nor do the resyncs.
    expect(logLines(child.err, 'tenant added'), 'tenants added while it ran').to.deep.equal([]);

    // Nothing of a retired tenant is left; every remaining tenant keeps all of its objects.
    const vhost = vhostOfAmqpUrl(config.broker.url);
    const [queues, exchanges, policies] = await Promise.all([api.listQueues(vhost), api.listExchangeNames(vhost), api.listPolicies(vhost)]);
    const tenantOf = (name: string): string | undefined => parseBrokerName(config.prefix, name)?.tenant;
    const left = [...queues.map((q) => q.name), ...exchanges, ...policies.map((p) => p.name)].filter((name) =>
      gone.has(tenantOf(name) ?? ''),
    );
    expect(left, 'objects of retired tenants').to.deep.equal([]);
    const queuesOf = (tenant: string): number => queues.filter((q) => tenantOf(q.name) === tenant).length;
    for (const tenant of draw(remaining, 20)) {
      for (const queue of [
        names.queue('conversions', tenant),
        names.queue('conversions', tenant, 'pdf'),
        names.queue('representations', tenant),
      ])
        expect(
          queues.some((q) => q.name === queue),
          queue,
        ).to.equal(true);
      expect(exchanges, tenant).to.include(names.tenantExchange(tenant));
      expect(queuesOf(tenant), `${tenant}'s queues`).to.be.greaterThan(3);
    }
    console.log(
      `      provision ${provisionSeconds.toFixed(1)} s, serving all ${startSeconds.toFixed(1)} s after start, ` +
        `${SAMPLED} jobs ${jobsSeconds.toFixed(1)} s, ${RETIRED} retirements ${retireSeconds.toFixed(1)} s`,
    );
  });
});
