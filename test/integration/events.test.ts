import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import type { RawConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { PublishError, QueueFullError, StagecoachError } from '../../src/errors/errors.js';
import type { OjsEvent } from '../../src/events/ojs-event.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { vhostOfAmqpUrl } from '../../src/security/broker-users.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { held } from '../fixtures/test-stages.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { EventTap } from '../helpers/event-tap.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'events' }, 'error');
const TEST_STAGES = path.join(REPO_ROOT, 'dist/test/fixtures/test-stages.js');
const RELAY = [{ name: 'relay', input: 'in', outputs: ['out'] }];
const env = { AMQP_URL };
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function rewrite(file: string, change: (raw: RawConfig) => void): Promise<void> {
  const raw = JSON.parse(await readFile(file, 'utf8')) as RawConfig;
  change(raw);
  await writeFile(file, JSON.stringify(raw));
}

/** Runs the command line and expects it to succeed. */
async function cli(args: string[], file: string): Promise<string> {
  const result = await runCli([...args, '--config', file], env, 30_000);
  expect(result.code, `stagecoach ${args.join(' ')}: ${result.stderr}`).to.equal(0);
  return result.stdout;
}

describe('OJS events of administration on <prefix>.events', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let tap: EventTap;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', 'initech'],
        queues: { in: {}, out: { max_size: 2 }, legacy: {} },
        stages: { relay: { module: TEST_STAGES } },
      },
      RELAY,
      'events',
    );
    tap = await EventTap.open(project.config.broker.url, project.names.events);
  });

  after(async () => {
    await tap?.close();
    if (project === undefined) return;
    // What the commands added (globex) is in the file's final configuration.
    await teardown(await loadConfig(project.file, env), RELAY);
    await project.remove();
  });

  it('provisioning a new tenant publishes tenant.provisioned and its own settings queue.config_updated; provisioning again announces nothing', async () => {
    const { file, config } = project;
    await rewrite(file, (c) => {
      c.tenants = [...(c.tenants ?? []), { name: 'globex', queues: { out: { max_size: 5 } } }];
    });
    await cli(['provision', '--tenant', 'globex'], file);

    const provisioned = await tap.next('tenant.provisioned', (e) => e.subject === 'globex');
    expect(provisioned.routingKey).to.equal('tenant.provisioned');
    const event = provisioned.event;
    expect(event).to.include({ specversion: '1.0', type: 'tenant.provisioned', source: 'stagecoach/provision', subject: 'globex' });
    expect(event.id).to.match(UUID_V7);
    expect(Date.now() - Date.parse(event.time)).to.be.within(0, 60_000);
    expect(event.data).to.deep.equal({ tenant: 'globex' });
    expect(provisioned.properties).to.include({
      contentType: 'application/cloudevents+json',
      messageId: event.id,
      type: 'tenant.provisioned',
      deliveryMode: 2,
    });

    const updated = await tap.next('queue.config_updated', (e) => e.data.policy === `${config.prefix}.queue.out.globex`);
    expect(updated.event).to.include({ source: 'stagecoach/provision', subject: 'out' });
    expect(updated.event.data).to.deep.include({ queue: 'out', tenant: 'globex', dead_letters: false });
    expect(updated.event.data.definition).to.deep.equal({ 'max-length': 5, overflow: 'reject-publish', 'queue-version': 2 });

    const before = tap.events.length;
    await cli(['provision', '--tenant', 'globex'], file);
    await tap.fence();
    expect(
      tap.events.slice(before).map((t) => t.event.type),
      'nothing new: the tenant existed, the settings held',
    ).to.deep.equal([]);
  });

  it('apply of a changed setting publishes queue.config_updated naming the queue and the change', async () => {
    const { file, config } = project;
    await rewrite(file, (c) => {
      c.queues = { ...c.queues, out: { max_size: 4 } };
    });
    await cli(['apply'], file);
    const updated = await tap.next(
      'queue.config_updated',
      (e) => e.source === 'stagecoach/apply' && e.data.policy === `${config.prefix}.queue.out`,
    );
    expect(updated.event.subject).to.equal('out');
    expect(updated.event.data).to.include({ queue: 'out', action: 'change', dead_letters: false });
    expect(updated.event.data.detail).to.contain('max-length');
  });

  it('queue delete publishes queue.deleted with the strategy and the jobs it affected', async () => {
    const { file } = project;
    await rewrite(file, (c) => {
      delete c.queues?.legacy;
    });
    await cli(['queue', 'delete', 'legacy', '--strategy', 'discard'], file);
    const deleted = await tap.next('queue.deleted', (e) => e.subject === 'legacy');
    expect(deleted.event.source).to.equal('stagecoach/queue delete');
    expect(deleted.event.data).to.include({ queue: 'legacy', strategy: 'discard', jobs_affected: 0, discarded: 0, moved: 0 });
  });

  it('tenant retire publishes tenant.retired', async () => {
    const { file, names, raw } = project;
    await rewrite(file, (c) => {
      c.tenants = (c.tenants ?? []).filter((t) => t !== 'initech');
    });
    await cli(['tenant', 'retire', 'initech', '--strategy', 'discard'], file);
    const retired = await tap.next('tenant.retired', (e) => e.subject === 'initech');
    expect(retired.event).to.include({ source: 'stagecoach/tenant retire', type: 'tenant.retired' });
    expect(retired.event.data).to.include({ tenant: 'initech', strategy: 'discard', jobs_affected: 0 });
    expect(await raw.exchangeExists(names.tenantExchange('initech'))).to.equal(false);
  });
});

describe('dev publishes queue.config_updated for the settings it puts', function () {
  this.timeout(60_000);

  it('a provisioning StageGroup (what `dev` runs) announces each policy it puts, from the stage process', async () => {
    const config = withTestConfig(
      { tenants: ['acme'], queues: { out: { max_size: 7 } }, stages: { relay: { module: './test-stages.js' } } },
      path.join(REPO_ROOT, 'dist/test/fixtures/config.json'),
    );
    const tap = await EventTap.open(config.broker.url, new BrokerNames(config.prefix).events);
    let running: RunningGroup | undefined;
    try {
      running = await startGroup(config, [{ stage: 'relay', tenant: 'acme' }], log);
      const updated = await tap.next('queue.config_updated', (e) => e.data.policy === `${config.prefix}.queue.out`);
      expect(updated.event).to.include({ source: 'stagecoach/relay', subject: 'out' });
      expect(updated.event.data.definition).to.deep.equal({ 'max-length': 7, overflow: 'reject-publish', 'queue-version': 2 });
    } finally {
      await running?.stop();
      await tap.close();
    }
  });
});

/**
 * One scenario in steps: a running relay for acme holds one job, so its input (max_size 2)
 * fills up; producers are refused; the metrics show it; then the relay runs and its emits meet
 * a full output (max_size 1).
 */
describe('QUEUE_FULL, queue.full and the capacity metrics', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let tap: EventTap;
  let group: StageGroup;
  let publisher: Publisher;

  before(async () => {
    held.open = false;
    project = await writeConfigFile(
      {
        tenants: ['acme'],
        queues: { in: { max_size: 2, default_retry: { max_attempts: 1 } }, out: { max_size: 1 } },
        stages: { relay: { module: TEST_STAGES, concurrency: 1, prefetch: 1 } },
      },
      RELAY,
      'events-capacity',
    );
    tap = await EventTap.open(project.config.broker.url, project.names.events);
    const [relay] = await loadAllStages(project.config);
    group = new StageGroup(project.config, [{ stage: relay, tenant: 'acme' }], log);
    await group.start();
    publisher = await Publisher.connect(project.config, { log });
  });

  after(async () => {
    held.open = true;
    await publisher?.close();
    await group?.stop(5000);
    await tap?.close();
    await project?.remove();
  });

  it('refuses a job for a full queue with QUEUE_FULL through Publisher and the CLI, and each process publishes queue.full once', async () => {
    const { names, raw, file } = project;
    await publisher.publish('in', { type: 'relay.me', args: ['h', 'hold'], tenant: 'acme' });
    await waitFor('the relay holding its job', () => held.active === 1);
    for (const value of ['a', 'b']) await publisher.publish('in', { type: 'relay.me', args: [value], tenant: 'acme' });
    await waitFor('two jobs ready in in.acme', async () => (await raw.count(names.queue('in', 'acme'))) === 2);

    const refused = await publisher.publish('in', { type: 'relay.me', args: ['c'], tenant: 'acme' }).catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(QueueFullError);
    expect(refused).to.be.instanceOf(PublishError);
    expect(refused).to.be.instanceOf(StagecoachError);
    expect(refused).to.include({
      code: 'QUEUE_FULL',
      queue: 'in',
      tenant: 'acme',
      exchange: names.root,
      routingKey: 'in',
      transient: false,
    });

    const full = await tap.next('queue.full', (e) => e.source === 'stagecoach/publisher');
    expect(full.routingKey).to.equal('queue.full');
    expect(full.event.subject).to.equal('in');
    expect(full.event.data).to.deep.equal({
      queue: 'in',
      tenant: 'acme',
      physical_queue: names.queue('in', 'acme'),
      policy: 'reject',
      exchange: names.root,
      routing_key: 'in',
      refusals: 1,
    });

    // A second refusal within 10 s: refused again, but no second event from this process.
    const again = await publisher.publish('in', { type: 'relay.me', args: ['d'], tenant: 'acme' }).catch((err: unknown) => err);
    expect(again).to.have.property('code', 'QUEUE_FULL');

    const result = await runCli(['publish', 'in', '--type', 'relay.me', '--args', '["e"]', '--tenant', 'acme', '--config', file], env);
    expect(result.code).to.equal(1);
    expect(result.stdout).to.equal('');
    expect(result.stderr).to.contain(
      'stagecoach: queue "in" of tenant "acme" is full (QUEUE_FULL: max_size reached, overflow_policy reject): the broker refused the job, nothing was enqueued',
    );
    const fromCli = await tap.next('queue.full', (e) => e.source === 'stagecoach/publish');
    expect(fromCli.event.data).to.include({ physical_queue: names.queue('in', 'acme'), refusals: 1 });

    await tap.fence();
    expect(tap.of('queue.full', (e) => e.source === 'stagecoach/publisher')).to.have.length(1);
    expect(await raw.count(names.queue('in', 'acme'))).to.equal(2);
  });

  it("shows the stage's input depth, the max_size in force and the utilization, as the broker reports them", async () => {
    const { names, config } = project;
    const queue = names.queue('in', 'acme');
    // The broker's own view of the queue: the policy it applies (the management API shows it
    // with the queue's statistics, up to one collection interval late).
    const reported = await waitFor('the broker reporting the policy of in.acme', async () => {
      const url = new URL(config.broker.management);
      const answer = await fetch(
        `${url.protocol}//${url.host}/api/queues/${encodeURIComponent(vhostOfAmqpUrl(config.broker.url))}/${encodeURIComponent(queue)}`,
        { headers: { authorization: `Basic ${Buffer.from(`${url.username}:${url.password}`).toString('base64')}` } },
      );
      const body = (await answer.json()) as { effective_policy_definition?: Record<string, unknown>; messages_ready?: number };
      const maxLength = body.effective_policy_definition?.['max-length'];
      return typeof maxLength === 'number' && body.messages_ready === 2 ? { maxLength, ready: body.messages_ready } : undefined;
    });
    const labels = `{stage="relay",queue="in",tenant="acme",physical_queue="${queue}"}`;
    // Depths are read in the background every 15 s (QueueDepthCache): the next reading shows it.
    const text = await waitFor(
      'a depth reading with the policy',
      async () => {
        const t = await group.metrics.text();
        return (
          sample(t, `stagecoach_queue_depth${labels}`) === reported.ready && sample(t, `stagecoach_queue_max_size${labels}`) === 2 && t
        );
      },
      25_000,
    );
    expect(sample(text, `stagecoach_queue_depth${labels}`)).to.equal(reported.ready);
    expect(sample(text, `stagecoach_queue_max_size${labels}`))
      .to.equal(reported.maxLength)
      .and.to.equal(2);
    expect(sample(text, `stagecoach_queue_utilization${labels}`)).to.equal(1);
  });

  it('a stage whose emit a full queue refuses dead-letters the job as QUEUE_FULL, counts the refusal and publishes queue.full', async () => {
    const { names, raw } = project;
    held.open = true;
    await waitFor('a relayed job dead-lettered', async () => ((await raw.count(names.deadQueue('in', 'acme'))) ?? 0) >= 1);
    const [dead] = await raw.drain(names.deadQueue('in', 'acme'));
    expect(dead.properties.headers).to.include({ 'x-ojs-error-type': 'QUEUE_FULL', 'x-ojs-tenant': 'acme' });
    expect((JSON.parse(dead.content.toString()) as { error: { type: string } }).error.type).to.equal('QUEUE_FULL');

    const full = await tap.next('queue.full', (e: OjsEvent) => e.source === 'stagecoach/relay');
    expect(full.event.data).to.include({ queue: 'out', tenant: 'acme', physical_queue: names.queue('out', 'acme'), policy: 'reject' });
    const text = await group.metrics.text();
    const overflow = sample(
      text,
      `stagecoach_queue_overflow_total{queue="out",tenant="acme",physical_queue="${names.queue('out', 'acme')}",policy="reject"}`,
    );
    expect(overflow).to.be.at.least(1);
  });
});

/** The value of the one sample line that starts with `series` (name and labels, as prom-client writes them). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
