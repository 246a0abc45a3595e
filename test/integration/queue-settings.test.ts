import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import amqplib from 'amqplib';
import type { RawConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { QueueFullError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { teardown } from '../../src/testing/test-config.js';
import { finished, REPO_ROOT, runCli, spawnCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'queue-settings' }, 'error');
const TEST_STAGES = path.join(REPO_ROOT, 'dist/test/fixtures/test-stages.js');
const RELAY = [{ name: 'relay', input: 'in', outputs: ['out'] }];
const env = { AMQP_URL };

async function rewrite(file: string, change: (raw: RawConfig) => void): Promise<void> {
  const raw = JSON.parse(await readFile(file, 'utf8')) as RawConfig;
  change(raw);
  await writeFile(file, JSON.stringify(raw));
}

/** Lines of `plan`'s report that name a change (indented), without the header and the count. */
function changeLines(stdout: string): string[] {
  return stdout.split('\n').filter((line) => line.startsWith('  '));
}

/** Whether the broker takes one more job into `out` for `tenant` (confirmed) or refuses it. */
async function takesOneMore(publisher: Publisher, tenant: string): Promise<boolean> {
  try {
    await publisher.publish('out', { type: 'probe', args: [], tenant });
    return true;
  } catch (err) {
    expect(err).to.be.instanceOf(QueueFullError);
    expect(err).to.include({ code: 'QUEUE_FULL', queue: 'out', tenant });
    return false;
  }
}

describe('queue settings change in place (policies), plan and apply', function () {
  let project: ConfigFile;
  let publisher: Publisher;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', { name: 'globex', queues: { out: { max_size: 3 } } }],
        queues: {
          in: { default_retry: { max_attempts: 1 } },
          out: { max_size: 2, dead_letter_ttl: 'PT1S', dead_letter_max_size: 2 },
        },
        stages: { relay: { module: TEST_STAGES } },
      },
      RELAY,
      'queue-settings',
    );
    publisher = await Publisher.connect(project.config, { log });
  });

  after(async () => {
    await publisher?.close();
    await project?.remove();
  });

  it('raising and lowering max_size on a running stage takes effect at once: plan shows exactly the change, apply carries it out, no stage exits', async function () {
    this.timeout(90_000);
    const { file, names, raw } = project;
    const out = names.queue('out', 'acme');
    const dead = names.deadQueue('in', 'acme');
    const relayed = async (jobs: number): Promise<void> => {
      for (let i = 0; i < jobs; i++) await publisher.publish('in', { type: 'relay.me', args: [`doc-${i}`], tenant: 'acme' });
    };
    const settled = (outCount: number, deadCount: number) => async () =>
      (await raw.count(out)) === outCount && (await raw.count(dead)) === deadCount && (await raw.count(names.queue('in', 'acme'))) === 0;

    const stage = spawnCli(['run', 'relay', '--tenant', 'acme', '--config', file], env);
    try {
      await waitFor('the relay consuming', async () => stage.err.includes('"state":"running"') || stage.exitCode !== null, 20_000);
      expect(stage.exitCode, stage.err).to.equal(null);

      // max_size 2: the third emit is refused; the job fails like a throw and is dead-lettered (1 attempt).
      await relayed(3);
      await waitFor('2 relayed, 1 refused', settled(2, 1));

      await rewrite(file, (c) => void ((c.queues ?? {}).out = { ...c.queues?.out, max_size: 4 }));
      const planned = await runCli(['plan', '--config', file], env);
      expect(planned.code, planned.stderr).to.equal(3);
      expect(changeLines(planned.stdout)).to.deep.equal([`  change   ${names.prefix}.queue.out: max-length 2 -> 4`]);
      expect(planned.stdout).to.contain('1 difference: 1 to change (stagecoach apply)');
      const json = await runCli(['plan', '--json', '--config', file], env);
      expect(json.code).to.equal(3);
      const parsed = JSON.parse(json.stdout) as {
        changes: Array<{ kind: string; action: string; name: string; wanted: { definition: unknown } }>;
      };
      expect(parsed.changes.map((c) => [c.kind, c.action, c.name])).to.deep.equal([['policy', 'change', `${names.prefix}.queue.out`]]);
      expect(parsed.changes[0].wanted.definition).to.deep.equal({ 'max-length': 4, overflow: 'reject-publish', 'queue-version': 2 });

      const applied = await runCli(['apply', '--config', file], env);
      expect(applied.code, applied.stderr).to.equal(0);
      expect(applied.stdout).to.contain(`change   policy ${names.prefix}.queue.out: max-length 2 -> 4`);
      const after = await runCli(['plan', '--config', file], env);
      expect(after.code, after.stdout).to.equal(0);
      expect(after.stdout).to.contain('nothing differs');
      expect((await runCli(['apply', '--config', file], env)).stdout, 'apply again: nothing to do').to.match(
        /^applied 0 changes\nnothing differs\n$/,
      );

      // Raised to 4 on the running stage: two more relayed, the fifth refused.
      await relayed(3);
      await waitFor('4 relayed, 2 refused', settled(4, 2));
      expect(await takesOneMore(publisher, 'acme')).to.equal(false);

      // Lowered to 1: the 4 jobs in the queue stay (reject never drops), new ones are refused until it holds fewer than 1.
      await rewrite(file, (c) => void ((c.queues ?? {}).out = { ...c.queues?.out, max_size: 1 }));
      expect(changeLines((await runCli(['plan', '--config', file], env)).stdout)).to.deep.equal([
        `  change   ${names.prefix}.queue.out: max-length 4 -> 1`,
      ]);
      expect((await runCli(['apply', '--config', file], env)).code).to.equal(0);
      expect(await raw.count(out)).to.equal(4);
      expect(await takesOneMore(publisher, 'acme')).to.equal(false);
      await raw.drain(out);
      await relayed(2);
      await waitFor('1 relayed, 1 more refused', settled(1, 3));

      expect(stage.exitCode, 'the stage never exited').to.equal(null);
      expect(stage.err).not.to.contain('TOPOLOGY_CONFLICT');
    } finally {
      stage.kill('SIGTERM');
      const exit = await finished(stage, 30_000, 'run relay');
      expect(exit.code, exit.stderr).to.equal(0);
    }
  });

  it("enforces a tenant's own max_size on its queues only", async () => {
    const { names, raw } = project;
    await raw.drain(names.queue('out', 'acme'));
    await raw.drain(names.queue('out', 'globex'));
    const limit = async (tenant: string): Promise<number> => {
      let taken = 0;
      while (await takesOneMore(publisher, tenant)) if (++taken > 10) break;
      return taken;
    };
    expect(await limit('globex'), "globex's own max_size").to.equal(3);
    expect(await limit('acme'), "acme keeps the queue's").to.equal(1);
  });

  it('keeps dead letters for dead_letter_ttl, and at most dead_letter_max_size of them (the oldest go first)', async () => {
    const { names, raw } = project;
    const dead = names.deadQueue('out', 'acme');
    for (const n of [1, 2, 3]) await raw.publish(names.dlx, dead, `letter-${n}`);
    expect(await raw.count(dead)).to.equal(2);
    const start = Date.now();
    await waitFor('the dead letters expired', async () => (await raw.count(dead)) === 0, 10_000);
    expect(Date.now() - start).to.be.lessThan(10_000);
  });
});

describe('a queue declared by an older stagecoach, with its bounds as arguments', function () {
  let project: ConfigFile;

  before(async () => {
    project = await writeConfigFile(
      { tenants: [], queues: { in: {}, out: {} }, stages: { relay: { module: TEST_STAGES } } },
      RELAY,
      'legacy',
    );
  });

  after(async () => {
    await teardown(await loadConfig(project.file, env), RELAY);
    await project.remove();
  });

  it('is refused with what to do: run exits 1 naming plan, plan says recreate needed, apply does the rest and leaves it', async function () {
    this.timeout(60_000);
    const { file, names } = project;
    const legacy = names.queue('in', 'acme');
    // What stagecoach declared when max_size was a queue argument.
    const connection = await amqplib.connect(AMQP_URL);
    const channel = await connection.createChannel();
    await channel.assertQueue(legacy, {
      durable: false,
      arguments: {
        'x-dead-letter-exchange': names.dlx,
        'x-dead-letter-routing-key': names.deadQueue('in', 'acme'),
        'x-max-length': 2,
        'x-overflow': 'reject-publish',
      },
    });
    await connection.close();
    await rewrite(file, (c) => {
      c.tenants = ['acme'];
      (c.queues ?? {}).in = { max_size: 2 };
    });

    const run = await runCli(['run', 'relay', '--tenant', 'acme', '--config', file], env, 30_000);
    expect(run.code).to.equal(1);
    expect(run.stderr).to.contain(`queue "${legacy}"`);
    expect(run.stderr).to.contain('`stagecoach plan` lists what needs recreating');

    const recreate =
      `  recreate ${legacy}: recreate needed: argument x-max-length 2 -> (none) (max_size is a policy now), ` +
      'argument x-overflow reject-publish -> (none) (overflow_policy is a policy now)';
    const planned = await runCli(['plan', '--config', file], env);
    expect(planned.code).to.equal(3);
    expect(changeLines(planned.stdout)).to.include(recreate);

    const applied = await runCli(['apply', '--config', file], env);
    expect(applied.code, applied.stderr).to.equal(3);
    const after = await runCli(['plan', '--config', file], env);
    expect(changeLines(after.stdout)).to.deep.equal([recreate]);
    const policies = await new ManagementClient(project.config.broker.management).listPolicies('/');
    expect(policies.map((p) => p.name)).to.include(`${names.prefix}.queue.in`);
  });
});
