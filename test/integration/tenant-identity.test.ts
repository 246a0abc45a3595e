import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { StagecoachError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageRunner } from '../../src/runner/stage-runner.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import type { BrokerNames } from '../../src/topology/names.js';
import { seen } from '../fixtures/failure-stages.js';
import { finished, runCli, spawnCli } from '../helpers/cli.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL, type RawBroker } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'tenant-identity' }, 'error');
const RULE = '(^[a-z0-9][a-z0-9_-]{0,62}$: lowercase letters, digits, "_" and "-", no dots, at most 63 characters)';
const BAD = 'Bad Tenant X';

describe('tenant slugs and known tenants on the command line', function () {
  const stages = [{ name: 'flaky', input: 'work', outputs: ['done'] }];
  const env = { AMQP_URL };
  let project: ConfigFile;
  let file: string;
  let config: CompiledConfig;
  let names: BrokerNames;
  let raw: RawBroker;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme'],
        queues: { work: { variants: { by: 'kind', values: { pdf: ['pdf'] } }, default_retry: { max_attempts: 1 } } },
        stages: { flaky: { module: FAILURE_STAGES_MODULE } },
      },
      stages,
      'tenants',
    );
    ({ file, config, names, raw } = project);
  });

  after(async () => {
    // Whatever a command might have declared for these tenants (the code before this check did).
    const extra = ['initech', 'hooli', 'acme.pdf', BAD].map((tenant) => provisionTopology(config, stages, tenant));
    await teardown(config, stages, ...extra);
    await project.remove();
  });

  it('refuses a bad --tenant on every command that takes one, with exit 2 and the rule, before touching the broker', async function () {
    this.timeout(60_000);
    const commands = [
      ['run', 'flaky'],
      ['provision'],
      ['topology'],
      ['publish', 'work', '--type', 'flaky', '--args', '["ok","bad-tenant"]'],
      ['dead', 'list', 'work'],
      ['dead', 'purge', 'work'],
      ['pause', 'work'],
      ['resume', 'work'],
      ['drain', 'work'],
      ['quiet'],
      ['terminate'],
    ];
    const results = await Promise.all(commands.map((command) => runCli([...command, '--tenant', BAD, '--config', file], env, 40000)));
    results.forEach((result, i) => {
      const what = commands[i].join(' ');
      expect(result.code, `${what}: ${result.stderr}`).to.equal(2);
      expect(result.stderr, what).to.contain(`--tenant: "${BAD}" is not a tenant slug ${RULE}`);
    });
    expect(await raw.count(names.unroutable), 'nothing published').to.equal(0);
    expect(await raw.exchangeExists(names.tenantExchange(BAD)), 'nothing provisioned').to.equal(false);
  });

  it('refuses a bad STAGECOACH_TENANT the same way', async () => {
    const commands = [['run', 'flaky'], ['publish', 'work', '--type', 'flaky', '--args', '["ok","env-tenant"]'], ['provision']];
    const results = await Promise.all(
      commands.map((command) => runCli([...command, '--config', file], { ...env, STAGECOACH_TENANT: 'acme.pdf' }, 15000)),
    );
    results.forEach((result, i) => {
      const what = commands[i].join(' ');
      expect(result.code, `${what}: ${result.stderr}`).to.equal(2);
      expect(result.stderr, what).to.contain(`STAGECOACH_TENANT: "acme.pdf" is not a tenant slug ${RULE}`);
    });
    expect(await raw.count(names.unroutable), 'nothing published').to.equal(0);
  });

  it("`run flaky --tenant acme.pdf` exits 2 and leaves acme's pdf variant queue (the same name) alone", async () => {
    // The collision the slug rule prevents: tenant "acme.pdf" would read acme's pdf variant queue.
    expect(names.queue('work', 'acme.pdf')).to.equal(names.queue('work', 'acme', 'pdf'));
    const published = await runCli(
      ['publish', 'work', '--type', 'flaky', '--args', '["ok","pdf-job"]', '--tenant', 'acme', '--header', 'kind=pdf', '--config', file],
      env,
    );
    expect(published.code, published.stderr).to.equal(0);
    await waitFor("the job in acme's pdf queue", async () => (await raw.count(names.queue('work', 'acme', 'pdf'))) === 1);

    const result = await runCli(['run', 'flaky', '--tenant', 'acme.pdf', '--config', file], env, 15000);
    expect(result.code, result.stderr).to.equal(2);
    expect(result.stderr).to.contain(`--tenant: "acme.pdf" is not a tenant slug ${RULE}`);
    expect(result.stderr, 'it never consumed').not.to.contain('stage consuming');
    expect(await raw.count(names.queue('work', 'acme', 'pdf')), "acme's pdf job is still there").to.equal(1);
    expect(await raw.count(names.deadQueue('work', 'acme')), 'nothing dead-lettered').to.equal(0);
    expect(await raw.exchangeExists(names.tenantExchange('acme.pdf'))).to.equal(false);
    await raw.drain(names.queue('work', 'acme', 'pdf'));
  });

  it('refuses to run for a tenant neither configured nor provisioned, naming it and how to provision it', async () => {
    const result = await runCli(['run', 'flaky', '--tenant', 'hooli', '--config', file], env, 15000);
    expect(result.code, result.stderr).to.equal(2);
    expect(result.stderr).to.contain(
      `tenant "hooli" is neither configured (tenants in ${file}) nor provisioned on the broker: run \`stagecoach provision --tenant hooli\` first`,
    );
    expect(result.stderr, 'it never consumed').not.to.contain('stage consuming');
    // Checked before the stage declared anything: hooli is still unknown to the broker.
    expect(await raw.exchangeExists(names.tenantExchange('hooli'))).to.equal(false);
    expect(await raw.exists(names.queue('work', 'hooli'))).to.equal(false);
  });

  it('runs for a tenant that is not configured but provisioned on the broker', async () => {
    const provisioned = await runCli(['provision', '--tenant', 'initech', '--config', file], env);
    expect(provisioned.code, provisioned.stderr).to.equal(0);
    const published = await runCli(
      ['publish', 'work', '--type', 'flaky', '--args', '["ok","initech-job"]', '--tenant', 'initech', '--config', file],
      env,
    );
    expect(published.code, published.stderr).to.equal(0);

    const stage = spawnCli(['run', 'flaky', '--tenant', 'initech', '--config', file], env);
    try {
      await waitFor("initech's job done", async () => (await raw.count(names.queue('done', 'initech'))) === 1);
      expect(await raw.count(names.queue('work', 'initech'))).to.equal(0);
    } finally {
      stage.kill('SIGTERM');
    }
    const exit = await finished(stage, 15000, 'run flaky --tenant initech');
    expect(exit.code, exit.stderr).to.equal(0);
  });
});

describe('tenant slugs in the library and on deliveries (broker)', function () {
  const CONFIG: RawConfig = {
    tenants: ['acme'],
    queues: { work: { default_retry: { max_attempts: 3, initial_interval: 'PT1S', jitter: false } } },
    stages: { flaky: { module: './failure-stages.js' } },
  };
  let config: CompiledConfig;
  let running: RunningGroup;
  let names: BrokerNames;
  let raw: RawBroker;
  let runner: StageRunner;
  const work = (): string => names.queue('work', 'acme');
  const dead = (): string => names.deadQueue('work', 'acme');

  before(async () => {
    config = withTestConfig(CONFIG, path.join(here, '../fixtures/config.json'));
    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    ({ names, raw } = running);
    runner = running.group.runners[0];
  });

  after(() => running.stop());

  it('Publisher refuses the tenant "Bad Tenant X" before touching the broker', async () => {
    let refused: unknown;
    try {
      await running.publisher.publish('work', { type: 'flaky', args: ['ok', 'publisher-bad'], tenant: BAD });
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(StagecoachError);
    expect(refused).to.include({ name: 'TenantError', code: 'INVALID_REQUEST', tenant: BAD });
    expect((refused as Error).message).to.equal(`tenant: "${BAD}" is not a tenant slug ${RULE}`);
    expect(() => running.publisher.build('work', { type: 'flaky', tenant: 'acme.pdf' })).to.throw(/"acme\.pdf" is not a tenant slug/);
    expect(await raw.count(names.unroutable), 'nothing published').to.equal(0);
  });

  /** Publishes like a producer in another language: plain amqplib, straight to acme's queue. */
  async function publishRaw(key: string, bodyTenant: string | undefined, headerTenant: string): Promise<Record<string, unknown>> {
    const envelope = {
      id: `tenant-${key}`,
      type: 'flaky',
      queue: 'work',
      args: ['ok', key],
      ...(bodyTenant === undefined ? {} : { tenant: bodyTenant }),
    };
    await raw.publish('', work(), JSON.stringify(envelope), {
      contentType: 'application/openjobspec+json',
      headers: { 'x-ojs-tenant': headerTenant },
    });
    return envelope;
  }

  async function deadLetter(key: string): Promise<{ type: unknown; message: string; body: unknown }> {
    await waitFor(`${key} in the dead-letter queue`, async () => (await raw.count(dead())) === 1, 10000);
    const [letter] = await raw.drain(dead());
    expect(seen.get(key)?.length ?? 0, 'handler runs').to.equal(0);
    return {
      type: letter.properties.headers?.['x-ojs-error-type'],
      message: String(letter.properties.headers?.['x-ojs-error-message']),
      body: JSON.parse(letter.content.toString()),
    };
  }

  it('dead-letters a delivery whose tenant header is "Bad Tenant" as INVALID_PAYLOAD naming the header, though its body says acme', async () => {
    const before = runner.stats.deadLettered;
    const envelope = await publishRaw('bad-header', 'acme', 'Bad Tenant');
    const letter = await deadLetter('bad-header');
    expect(letter.type).to.equal('INVALID_PAYLOAD');
    expect(letter.message).to.equal(`header "x-ojs-tenant": "Bad Tenant" is not a tenant slug ${RULE}`);
    expect(letter.body, 'the body is kept as it came').to.deep.equal(envelope);
    // Counted once settled, a little after the broker has the dead letter.
    await waitFor('the dead letter counted', () => runner.stats.deadLettered === before + 1, 10_000);
  });

  it('dead-letters a delivery whose only tenant, in the header, is not a slug, naming the header', async () => {
    await publishRaw('bad-header-only', undefined, 'Bad Tenant');
    const letter = await deadLetter('bad-header-only');
    expect(letter.type).to.equal('INVALID_PAYLOAD');
    expect(letter.message).to.match(/^header "x-ojs-tenant": "Bad Tenant" is not a tenant slug/);
  });

  it('dead-letters a delivery whose envelope names the tenant "acme.pdf", naming the field', async () => {
    await publishRaw('bad-body', 'acme.pdf', 'acme');
    const letter = await deadLetter('bad-body');
    expect(letter.type).to.equal('INVALID_PAYLOAD');
    expect(letter.message).to.match(/^the envelope's "tenant": "acme\.pdf" is not a tenant slug/);
  });
});
