import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { GetMessage } from 'amqplib';
import type { CompiledConfig } from '../../src/config/config.types.js';
import type { Job } from '../../src/job/job.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { teardown } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { finished, REPO_ROOT, runCli, spawnCli, type CliResult } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * A user's project outside this repository: stagecoach installed in its node_modules, a stage
 * in plain JavaScript applying the decorator as a function, a configuration file naming it.
 */
const STAGE_JS = `
import { Stage } from 'stagecoach';

export class Shouter {
  async handle(job, ctx) {
    const [word] = job.args;
    if (word === 'fail') throw new RangeError('cannot shout "fail"');
    await ctx.emit('shouted', { type: 'word.shouted', args: [String(word).toUpperCase()] });
    // Dies after its emit resolved (the output handed to the broker, maybe not yet confirmed), before the input is acknowledged.
    if (word === 'crash-after-emit') process.exit(3);
  }
}
Stage({ name: 'shouter', input: 'words', outputs: ['shouted'] })(Shouter);
`;

describe('command line with a plain JavaScript stage outside the repository', function () {
  let dir: string;
  let file: string;
  let config: CompiledConfig;
  let names: BrokerNames;
  let raw: RawBroker;
  const env = { AMQP_URL };

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-user-project-'));
    await mkdir(path.join(dir, 'node_modules'));
    await symlink(REPO_ROOT, path.join(dir, 'node_modules', 'stagecoach'), 'dir');
    await writeFile(path.join(dir, 'shouter.stage.mjs'), STAGE_JS);
    file = path.join(dir, 'stagecoach.json');
    const prefix = `test-${randomBytes(4).toString('hex')}`;
    await writeFile(
      file,
      JSON.stringify({
        prefix,
        durable: false,
        tenants: ['acme', 'globex'],
        queues: { words: { default_retry: { max_attempts: 1 } } },
        stages: { shouter: { module: './shouter.stage.mjs' } },
      }),
    );
    config = await loadConfig(file, env);
    names = new BrokerNames(prefix);
    raw = await RawBroker.connect(config.broker.url);
  });

  after(async () => {
    await raw.close();
    const metas = (await loadAllStages(config)).map((s) => s.metadata);
    await teardown(config, metas, provisionTopology(config, metas, 'initech'));
    await rm(dir, { recursive: true, force: true });
  });

  it('provisions every tenant, publishes, and relays one tenant only, then drains on SIGTERM with exit 0', async () => {
    const provisioned = await runCli(['provision', '--config', file], env);
    expect(provisioned.code, provisioned.stderr).to.equal(0);
    expect(await raw.exists(names.queue('words', 'globex'))).to.equal(true);

    for (const [tenant, word] of [
      ['acme', 'hello'],
      ['globex', 'hej'],
      ['acme', 'world'],
      ['globex', 'verden'],
    ]) {
      const published = await runCli(
        ['publish', 'words', '--type', 'word', '--args', JSON.stringify([word]), '--tenant', tenant, '--config', file],
        env,
      );
      expect(published.code, published.stderr).to.equal(0);
      expect(published.stdout.trim()).to.match(/^[0-9a-f-]{36}$/);
    }

    const stage = spawnCli(['run', 'shouter', '--tenant', 'acme', '--config', file], env);
    try {
      await waitFor("acme's words shouted", async () => (await raw.count(names.queue('shouted', 'acme'))) === 2);
      await waitFor("acme's input acknowledged", async () => (await raw.count(names.queue('words', 'acme'))) === 0);
    } finally {
      stage.kill('SIGTERM');
    }
    const exit = await finished(stage, 15000, 'run shouter');
    expect(exit.code, exit.stderr).to.equal(0);
    expect(exit.stderr).to.contain('"message":"stage stopped"');

    const shouted = (await raw.drain(names.queue('shouted', 'acme'))).map(
      (m) => JSON.parse(m.content.toString()) as { args: string[]; tenant: string },
    );
    expect(shouted.map((j) => j.args[0]).sort()).to.deep.equal(['HELLO', 'WORLD']);
    expect(shouted.every((j) => j.tenant === 'acme')).to.equal(true);
    expect(await raw.count(names.queue('words', 'globex'))).to.equal(2);
    expect(await raw.count(names.queue('shouted', 'globex'))).to.equal(0);
  });

  it('keeps the input when the process dies after emitting but before acknowledging (at-least-once)', async () => {
    await runCli(['publish', 'words', '--type', 'word', '--args', '["crash-after-emit"]', '--tenant', 'acme', '--config', file], env);
    const stage = spawnCli(['run', 'shouter', '--tenant', 'acme', '--config', file], env);
    const exit = await finished(stage, 15000, 'run shouter');
    expect(exit.code).to.equal(3);
    // The input was never acknowledged, so the broker kept it. The output may or may not have
    // reached the broker before the exit (ctx.emit resolves at the hand-over): at most once here,
    // and the input's run again publishes it again (at-least-once).
    await waitFor('the input back in its queue', async () => (await raw.count(names.queue('words', 'acme'))) === 1);
    expect(await raw.count(names.queue('shouted', 'acme'))).to.be.at.most(1);
    await raw.drain(names.queue('words', 'acme'));
    await raw.drain(names.queue('shouted', 'acme'));
  });

  it('keeps a job published for an unknown tenant, lists it, and replays it once the tenant is provisioned', async () => {
    const published = await runCli(
      ['publish', 'words', '--type', 'word', '--args', '["late"]', '--tenant', 'initech', '--config', file],
      env,
    );
    // Told, and given the id of the job it keeps.
    expect(published.code).to.equal(1);
    expect(published.stderr).to.contain('tenant "initech" is not provisioned');
    const id = published.stdout.trim();
    const listed = await runCli(['unroutable', 'list', '--json', '--config', file], env);
    expect(listed.code, listed.stderr).to.equal(0);
    const entries = JSON.parse(listed.stdout) as Array<{ messageId: string; tenant: string; queue: string }>;
    expect(entries.map((e) => [e.messageId, e.tenant, e.queue])).to.deep.equal([[id, 'initech', 'words']]);

    expect((await runCli(['provision', '--tenant', 'initech', '--config', file], env)).code).to.equal(0);
    const replayed = await runCli(['unroutable', 'replay', '--json', '--config', file], env);
    expect(JSON.parse(replayed.stdout)).to.deep.equal({ replayed: 1, kept: 0 });
    const [moved] = await raw.drain(names.queue('words', 'initech'));
    expect(moved.properties.messageId).to.equal(id);
  });

  it('lists, retries and purges dead letters', async () => {
    const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--config', file], env);
    const failed = (await cli('publish', 'words', '--type', 'word', '--args', '["fail"]', '--tenant', 'acme')).stdout.trim();
    const stage = spawnCli(['run', 'shouter', '--tenant', 'acme', '--config', file], env);
    try {
      await waitFor('the dead letter', async () => (await raw.count(names.deadQueue('words', 'acme'))) === 1);
      const listed = await cli('dead', 'list', 'words', '--tenant', 'acme', '--json');
      expect(listed.code, listed.stderr).to.equal(0);
      const [entry] = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
      expect(entry).to.include({
        id: failed,
        tenant: 'acme',
        attempt: 1,
        errorType: 'RangeError',
        errorMessage: 'cannot shout "fail"',
        isJob: true,
      });
      // Without --tenant: every configured tenant's dead letters.
      expect(JSON.parse((await cli('dead', 'list', 'words', '--json')).stdout)).to.have.length(1);

      const retried = await cli('dead', 'retry', 'words', '--tenant', 'acme', '--json');
      expect(JSON.parse(retried.stdout)).to.deep.equal({ retried: 1, kept: 0 });
      // It fails again: back in dead letters, with the first failure in its history.
      await waitFor(
        'dead again',
        async () => (await raw.count(names.deadQueue('words', 'acme'))) === 1 && (await raw.count(names.queue('words', 'acme'))) === 0,
      );
      const [again] = JSON.parse((await cli('dead', 'list', 'words', '--tenant', 'acme', '--json')).stdout) as Array<{ id: string }>;
      expect(again.id).to.equal(failed);

      const purged = await cli('dead', 'purge', 'words', '--tenant', 'acme');
      expect(purged.stdout.trim()).to.equal('purged 1');
      expect(await raw.count(names.deadQueue('words', 'acme'))).to.equal(0);
    } finally {
      stage.kill('SIGTERM');
      await finished(stage, 15000, 'run shouter');
    }
  });

  it('prints the topology without a broker', async () => {
    const printed = await runCli(['topology', '--tenant', 'acme', '--json', '--config', file], { AMQP_URL: 'amqp://127.0.0.1:1/' });
    expect(printed.code, printed.stderr).to.equal(0);
    const topology = JSON.parse(printed.stdout) as { queues: Array<{ name: string }> };
    expect(topology.queues.map((q) => q.name)).to.include.members([
      names.queue('words', 'acme'),
      names.queue('shouted', 'acme'),
      names.unroutable,
    ]);
    expect(topology.queues.map((q) => q.name).filter((n) => n.includes('globex'))).to.deep.equal([]);
  });

  it('exits 2 naming the file, the key and what was expected for a bad configuration', async () => {
    const bad = path.join(dir, 'bad.json');
    await writeFile(bad, JSON.stringify({ tenants: ['acme'], stages: { shouter: { module: './shouter.stage.mjs', concurrency: 0 } } }));
    const result = await runCli(['run', 'shouter', '--tenant', 'acme', '--config', bad], env);
    expect(result.code).to.equal(2);
    expect(result.stderr).to.contain(`${bad}: stages.shouter.concurrency: must be >= 1`);
  });

  it('exits 2 for a tenant-scoped stage without a tenant, and for an unknown stage', async () => {
    const noTenant = await runCli(['run', 'shouter', '--config', file], env);
    expect(noTenant.code).to.equal(2);
    expect(noTenant.stderr).to.match(/a tenant for stage "shouter".*--tenant/);
    const unknown = await runCli(['run', 'nosuch', '--tenant', 'acme', '--config', file], env);
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.contain('stage "nosuch": not in');
  });

  it('exits 2 for bad usage', async () => {
    expect((await runCli(['publish', 'words', '--config', file], env)).code).to.equal(2);
    expect((await runCli(['frobnicate'], env)).code).to.equal(2);
  });
});

describe('stagecoach publish: job fields, scheduling, and --version', function () {
  this.timeout(60_000);
  let file: ConfigFile;
  const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--config', file.file]);
  const body = (message: GetMessage): Job => JSON.parse(message.content.toString()) as Job;

  before(async () => {
    file = await writeConfigFile({ tenants: ['acme'], queues: { words: {} } }, [], 'publish-flags');
  });

  after(() => file?.remove());

  it('prints the version of the package', async () => {
    const manifest = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const printed = await runCli([flag]);
      expect(printed.code, printed.stderr).to.equal(0);
      expect(printed.stdout).to.equal(`${manifest.version}\n`);
    }
  });

  it('publishes every job field DESIGN.md lists: --priority, --timeout, --retry, --enqueue-ttl', async () => {
    const published = await cli(
      'publish',
      'words',
      '--type',
      'word',
      '--tenant',
      'acme',
      '--priority',
      '7',
      '--timeout',
      '30',
      '--retry',
      '{"max_attempts":5,"initial_interval":"PT2S"}',
      '--enqueue-ttl',
      'PT10M',
    );
    expect(published.code, published.stderr).to.equal(0);
    const [message] = await file.raw.drain(file.names.queue('words', 'acme'));
    // The OJS priority 7 as given in the envelope; on the broker's levels (amqp-priority.ts) it is 5.
    expect(message.properties).to.include({ messageId: published.stdout.trim(), priority: 5, expiration: '600000' });
    expect(body(message)).to.include({ priority: 7, timeout: 30, enqueue_ttl: 'PT10M' });
    expect(body(message).retry).to.deep.equal({ max_attempts: 5, initial_interval: 'PT2S' });
  });

  it('schedules a job with --delay or --scheduled-at: it waits on the broker and comes to the due queue when due', async () => {
    const main = file.names.queue('words', 'acme');
    const due = file.names.dueQueue('words', 'acme');
    const started = Date.now();
    const delayed = await cli('publish', 'words', '--type', 'word', '--tenant', 'acme', '--delay', 'PT2S');
    expect(delayed.code, delayed.stderr).to.equal(0);
    // 4 s ahead: a job less than half a second ahead when the command publishes it is not
    // scheduled but sent at once, and the command itself takes a second or two on a busy machine.
    const at = new Date(Date.now() + 4000).toISOString();
    const scheduled = await cli('publish', 'words', '--type', 'word', '--tenant', 'acme', '--scheduled-at', at);
    expect(scheduled.code, scheduled.stderr).to.equal(0);
    await waitFor('both jobs due', async () => (await file.raw.count(due)) === 2, 20_000);
    expect(Date.now() - started, 'not before their time').to.be.at.least(2000);
    expect(await file.raw.count(main), 'never in the main queue').to.equal(0);
    const byId = new Map((await file.raw.drain(due)).map((m) => [m.properties.messageId as string, m]));
    const viaDelay = byId.get(delayed.stdout.trim());
    const viaTime = byId.get(scheduled.stdout.trim());
    expect(viaTime && body(viaTime).scheduled_at).to.equal(at);
    expect(viaTime?.properties.headers).to.include({ 'x-ojs-scheduled-at': at });
    // --delay counts from publishing: scheduled_at is 2 s after the command started, or a little later.
    const delayedAt = Date.parse((viaDelay && body(viaDelay).scheduled_at) ?? '');
    expect(delayedAt - started)
      .to.be.at.least(2000)
      .and.below(2000 + 15_000);
  });

  it('exits 2 with a clear message for every bad job field, before publishing anything', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--priority', 'high'], /--priority must be an integer/],
      [['--priority', '1.5'], /--priority must be an integer/],
      [['--timeout', '0'], /--timeout must be a positive number of seconds, got "0"/],
      [['--timeout', 'soon'], /--timeout must be a positive number of seconds/],
      [['--retry', '{"max_attempts":0}'], /--retry: max_attempts must be an integer >= 1/],
      [['--retry', '{"initial_interval":"1s"}'], /--retry: initial_interval must be an ISO 8601 duration/],
      [['--retry', '{"max_attempts":'], /--retry is not JSON/],
      [['--enqueue-ttl', '10m'], /--enqueue-ttl must be a positive ISO 8601 duration such as "PT10M", got "10m"/],
      [['--delay', '30s'], /--delay must be an ISO 8601 duration such as "PT30S", got "30s"/],
      [['--scheduled-at', '2030-01-01T09:00:00'], /--scheduled-at must be an ISO 8601 timestamp with a time zone/],
      [
        ['--delay', 'PT5S', '--scheduled-at', new Date().toISOString()],
        /option '--scheduled-at <timestamp>' cannot be used with option '--delay <duration>'/,
      ],
    ];
    for (const [flags, message] of cases) {
      const result = await cli('publish', 'words', '--type', 'word', '--tenant', 'acme', ...flags);
      expect(result.code, flags.join(' ')).to.equal(2);
      expect(result.stderr, flags.join(' ')).to.match(message);
    }
    const retryPolicy = await cli('publish', 'words', '--type', 'word', '--tenant', 'acme', '--retry', '{"max_attempts":0}');
    expect(retryPolicy.stderr).to.contain('stagecoach: --retry');
    expect(
      await file.raw.counts([file.names.queue('words', 'acme'), file.names.dueQueue('words', 'acme'), file.names.unroutable]),
    ).to.deep.equal({
      [file.names.queue('words', 'acme')]: 0,
      [file.names.dueQueue('words', 'acme')]: 0,
      [file.names.unroutable]: 0,
    });
  });
});
