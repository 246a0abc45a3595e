import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { BrokerNode, brokerNodeUnsupported, freePorts } from '../helpers/broker-node.js';
import { finished, runCli, spawnCli } from '../helpers/cli.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'broker-alarm' }, 'error');
const GRACE_SECONDS = 3;
/** What a stop may take beyond the grace period: the process's own start-up of the exit, on a loaded 2-core machine. */
const EXIT_MARGIN_MS = 3000;
/** How long the held job runs before it publishes its output: longer than raising the alarm takes (rabbitmqctl boots a VM). */
const HELD_MS = 8000;

/** The first JSON log line of `level` whose message matches. */
function logged(stderr: string, level: string, message: RegExp): Record<string, unknown> | undefined {
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as Record<string, unknown>;
    if (entry.level === level && message.test(String(entry.message))) return entry;
  }
  return undefined;
}

/**
 * A broker alarm (memory or disk) on a private node: the broker blocks every connection that
 * publishes until it clears. The stage must stay stoppable within its grace period, lose nothing,
 * and say what is going on (log, metrics, readiness detail, `stagecoach queues`).
 */
describe('a broker alarm blocks the connection (private broker node)', function () {
  this.timeout(120_000);
  const stages = [{ name: 'flaky', input: 'work', outputs: ['done'] }];
  let node: BrokerNode | undefined;
  let project: ConfigFile;
  let alarmed = false;
  /** Stage processes of the test under way: killed after it, whatever happened. */
  const started: Array<ReturnType<typeof spawnCli>> = [];

  const work = (): string => project.names.queue('work', 'acme');
  const done = (): string => project.names.queue('done', 'acme');

  before(async function () {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    node = await BrokerNode.start({ name: `stagecoach-alarm-${randomBytes(3).toString('hex')}`, plugins: ['rabbitmq_management'] });
    project = await writeConfigFile(
      {
        tenants: ['acme'],
        gracePeriod: GRACE_SECONDS,
        broker: { url: node.url, management: managementUrl(node) },
        stages: { flaky: { module: FAILURE_STAGES_MODULE, concurrency: 1 } },
      },
      stages,
      'alarm',
      node.url,
    );
  });

  afterEach(async () => {
    for (const stage of started.splice(0)) if (stage.exitCode === null && stage.signalCode === null) stage.kill('SIGKILL');
    if (alarmed) await lowerAlarm();
    // A test that failed half-way leaves no job to the next one.
    for (const queue of [work(), project.names.dueQueue('work', 'acme'), done()]) await project.raw.drain(queue);
  });

  after(async () => {
    await project?.remove().catch(() => undefined);
    await node?.remove();
  });

  function managementUrl(broker: BrokerNode): string {
    return `http://guest:guest@127.0.0.1:${broker.managementPort as number}/`;
  }

  function env(port = 0): NodeJS.ProcessEnv {
    const broker = node as BrokerNode;
    return {
      AMQP_URL: broker.url,
      STAGECOACH_MANAGEMENT_URL: managementUrl(broker),
      STAGECOACH_HTTP_PORT: String(port),
      LOG_LEVEL: 'info',
    };
  }

  /** Publishes (and closes its connection before any alarm: a blocked publisher would hang the test). */
  async function publish(jobs: Array<[mode: string, key: string, n?: number]>): Promise<void> {
    const publisher = await Publisher.connect(project.config, { log });
    for (const args of jobs) await publisher.publish('work', { type: 'flaky', args, tenant: 'acme' });
    await publisher.close();
  }

  async function raiseAlarm(): Promise<void> {
    await (node as BrokerNode).ctl(['set_vm_memory_high_watermark', '0.0000001']);
    alarmed = true;
  }

  async function lowerAlarm(): Promise<void> {
    await (node as BrokerNode).ctl(['set_vm_memory_high_watermark', '0.4']);
    alarmed = false;
  }

  /**
   * Whether the broker stopped reading from a connection: it does so with the first publish after
   * the alarm (until then the connection is `blocking` and works). The test's own client never publishes.
   */
  async function someConnectionBlocked(): Promise<boolean> {
    const out = await (node as BrokerNode).ctl(['list_connections', 'state', '--no-table-headers', '--quiet']);
    return out.split('\n').some((row) => row.trim() === 'blocked');
  }

  /**
   * A stage that has published (its first job's output) and holds a second job, whose output it
   * publishes after the alarm is raised: that publish blocks the connection, and the job stays
   * unfinished (its output unconfirmed) while the alarm lasts.
   */
  async function stageBlockedWithAJob(port = 0): Promise<ReturnType<typeof spawnCli>> {
    const stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--config', project.file], env(port));
    started.push(stage);
    await publish([['ok', 'first']]);
    await waitFor('the first output published', async () => (await project.raw.count(done())) === 1, 30_000);
    await publish([['slow', 'held', HELD_MS]]);
    await waitFor('the held job taken', async () => (await project.raw.count(work())) === 0, 15_000);
    await raiseAlarm();
    await waitFor('the stage connection blocked by its next output', someConnectionBlocked, HELD_MS + 15_000);
    return stage;
  }

  it('SIGTERM during the alarm exits within the grace period (code 1) and the unfinished job comes back', async () => {
    const stage = await stageBlockedWithAJob();
    const began = Date.now();
    stage.kill('SIGTERM');
    const exit = await finished(stage, GRACE_SECONDS * 1000 + 30_000, 'run flaky');
    const took = Date.now() - began;
    expect(took, `stopped after ${took} ms; stderr: ${exit.stderr}`).to.be.below(GRACE_SECONDS * 1000 + EXIT_MARGIN_MS);
    expect(exit.code, exit.stderr).to.equal(1);
    expect(logged(exit.stderr, 'info', /^stopping: finishing the jobs in flight/), 'SIGTERM is logged').to.not.equal(undefined);
    expect(logged(exit.stderr, 'warn', /^stopping took the whole grace period/), 'the cut is logged').to.not.equal(undefined);
    await lowerAlarm();
    // Nothing lost: the job unfinished at SIGTERM is back in its queue (its output, sent before the
    // connection was cut, may arrive too once the broker reads again: a duplicate, never a loss).
    await waitFor('the held job back in its queue', async () => (await project.raw.count(work())) === 1, 15_000);
    const [back] = await project.raw.drain(work());
    expect(JSON.parse(back.content.toString()).args[1]).to.equal('held');
    const outputs = (await project.raw.drain(done())).map((m) => JSON.parse(m.content.toString()).args[0] as string);
    expect(outputs).to.include('first');
  });

  it('logs, measures and reports the blocked connection, in /metrics, /readyz and `stagecoach queues`, until the alarm clears', async () => {
    const [port] = await freePorts(1);
    const http = (path: string): Promise<Response> => fetch(`http://127.0.0.1:${port}${path}`);
    const gauge = async (): Promise<string | undefined> =>
      /^stagecoach_connection_blocked (\d+)$/m.exec(await (await http('/metrics')).text())?.[1];
    const stage = await stageBlockedWithAJob(port);
    const warned = await waitFor('the blocked warning', () => logged(stage.err, 'warn', /broker blocked the connection/), 15_000);
    expect(warned.reason).to.match(/memory/i);
    expect(await gauge()).to.equal('1');
    const ready = await http('/readyz');
    // Blocked is not a reason to restart: the process resumes by itself once the alarm clears.
    expect(ready.status).to.equal(200);
    const readiness = (await ready.json()) as { blocked?: { reason: string; since: string } };
    expect(readiness.blocked?.reason).to.match(/memory/i);
    const queues = await waitFor(
      '`queues` with the alarm',
      async () => {
        const listed = await runCli(['queues', '--config', project.file], env());
        return /alarm.*memory/i.test(listed.stdout) ? listed : undefined;
      },
      20_000,
    );
    expect(queues.code, queues.stderr).to.equal(0);
    await lowerAlarm();
    const unblocked = await waitFor('the unblocked line', () => logged(stage.err, 'info', /broker unblocked the connection/), 15_000);
    expect(unblocked.blocked_ms).to.be.a('number').above(0);
    expect(await gauge()).to.equal('0');
    expect(((await (await http('/readyz')).json()) as { blocked?: unknown }).blocked).to.equal(undefined);
    // The management plugin samples the nodes every 5 s: the line goes with its next sample.
    await waitFor(
      '`queues` without the alarm',
      async () => !/alarm/i.test((await runCli(['queues', '--config', project.file], env())).stdout),
      20_000,
    );
    // The held job's output confirmed once the broker read again: nothing was lost meanwhile.
    await waitFor('the held output', async () => (await project.raw.count(done())) === 2, 15_000);
    stage.kill('SIGTERM');
    const exit = await finished(stage, GRACE_SECONDS * 1000 + 30_000, 'run flaky');
    expect(exit.code, exit.stderr).to.equal(0);
    await project.raw.drain(done());
  });
});
