import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import amqplib, { type Channel, type ChannelModel, type GetMessage, type Options } from 'amqplib';
import { retryDeadLetters } from '../../src/dead-letters/dead-letter-actions.js';
import { replayUnroutable } from '../../src/dead-letters/unroutable.js';
import { pauseTenant, resumeTenant } from '../../src/directives/batch-directives.js';
import { readTracking } from '../../src/tracker/tracker.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { createJob } from '../../src/job/envelope.js';
import { toWire } from '../../src/job/amqp-mapping.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { issueCredentials, provisionBrokerUsers } from '../../src/security/tenant-users.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { delayRoutingKey } from '../../src/topology/delay-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { held } from '../fixtures/test-stages.js';
import { runCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const SOURCE = path.join(here, '../fixtures/config.json');
const log = createLogger({ test: 'tenant-users' }, 'error');

export const TENANT_USERS_CONFIG: RawConfig = {
  security: { tenantUsers: true },
  tenants: ['acme', 'globex'],
  queues: {
    jobs: { scope: 'shared' },
    in: { default_retry: { max_attempts: 2, initial_interval: 'PT1S', jitter: false } },
    out: {},
  },
  stages: { relay: { module: './test-stages.js' }, fanout: { module: './test-stages.js' } },
};

/**
 * One broker user's own AMQP connection, as a compromised producer or stage would use it: plain
 * amqplib, no stagecoach in the way. Every attempt gets a fresh channel, because a refusal
 * closes the channel it happened on.
 */
class AsUser {
  private constructor(private readonly connection: ChannelModel) {}

  static async connect(url: string): Promise<AsUser> {
    const connection = await amqplib.connect(url);
    connection.on('error', () => undefined);
    return new AsUser(connection);
  }

  /** 'confirmed', or the broker's refusal (the reason its channel was closed). */
  async publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish = {}): Promise<string> {
    const channel = await this.connection.createConfirmChannel();
    return this.outcome(channel, async () => {
      channel.publish(exchange, routingKey, content, options);
      await channel.waitForConfirms();
      return 'confirmed';
    });
  }

  /** 'ok', or the broker's refusal. */
  async attempt(action: (channel: Channel) => Promise<unknown>): Promise<string> {
    const channel = await this.connection.createChannel();
    return this.outcome(channel, async () => {
      await action(channel);
      return 'ok';
    });
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }

  private async outcome(channel: Channel, action: () => Promise<string>): Promise<string> {
    let refusal: Error | undefined;
    channel.on('error', (err: Error) => (refusal = err));
    try {
      const result = await action();
      await channel.close();
      return result;
    } catch (err) {
      return `refused: ${(refusal ?? (err as Error)).message}`;
    }
  }
}

describe('broker-enforced producer identity (security.tenantUsers)', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let names: BrokerNames;
  let stages: LoadedStage[];
  let api: ManagementClient;
  let users: string[] = [];
  let url: { producerAcme: string; stageAcme: string; internal: string };
  let raw: RawBroker;
  let relayGroup: StageGroup;
  let fanoutGroup: StageGroup;
  let globexQueues: string[];
  /** Every message taken from a queue so far, by message id: tests drain shared queues. */
  const taken = new Map<string, Map<string, GetMessage>>();

  /** The configuration a process started with `AMQP_URL=<url>` would have. */
  const asUser = (amqpUrl: string): CompiledConfig =>
    compileConfig({ ...TENANT_USERS_CONFIG, prefix: config.prefix, durable: false, broker: { url: amqpUrl } }, SOURCE);

  /** Waits until the message `id` reached `queue` (taking what arrives there), then returns it. */
  async function arrival(queue: string, id: string, timeoutMs = 15_000): Promise<GetMessage> {
    const seen = taken.get(queue) ?? new Map<string, GetMessage>();
    taken.set(queue, seen);
    return waitFor(
      `message ${id} in ${queue}`,
      async () => {
        for (const message of await raw.drain(queue)) seen.set(message.properties.messageId as string, message);
        return seen.get(id);
      },
      timeoutMs,
    );
  }

  /** The relayed output of the input `value` (RelayStage emits `<value>@<tenant>`). */
  async function relayed(value: string): Promise<GetMessage> {
    const queue = names.queue('out', 'acme');
    const seen = taken.get(queue) ?? new Map<string, GetMessage>();
    taken.set(queue, seen);
    return waitFor(`the relay of ${value} in ${queue}`, async () => {
      for (const message of await raw.drain(queue)) seen.set(message.properties.messageId as string, message);
      return [...seen.values()].find((m) => (JSON.parse(m.content.toString()) as Job).args[0] === `${value}@acme`);
    });
  }

  async function globexCounts(): Promise<Record<string, number | undefined>> {
    return raw.counts(globexQueues);
  }

  function expectGlobexUntouched(counts: Record<string, number | undefined>): void {
    for (const queue of globexQueues) expect(counts[queue], queue).to.equal(0);
  }

  /** A well-formed job envelope on the wire, with the stamp a producer would choose. */
  function envelope(queue: string, tenant: string | undefined, args: unknown[] = ['forged']) {
    return toWire(createJob({ type: queue === 'jobs' ? 'fan' : 'relay.me', args }, { queue, ...(tenant ? { tenant } : {}) }), {
      tenantHeader: config.tenantHeader,
    });
  }

  before(async () => {
    // The operator (guest) provisions: topology and users. Passwords come from `credentials`.
    config = withTestConfig(TENANT_USERS_CONFIG, SOURCE);
    names = new BrokerNames(config.prefix);
    stages = await loadAllStages(config);
    const topology = provisionTopology(
      config,
      stages.map((s) => s.metadata),
    );
    await declareTopologyOnce(config, topology, log);
    api = new ManagementClient(config.broker.management);
    users = await provisionBrokerUsers(config, api, config.tenants);
    url = {
      producerAcme: await issueCredentials(config, api, `${config.prefix}.producer.acme`),
      stageAcme: await issueCredentials(config, api, `${config.prefix}.stage.acme`),
      internal: await issueCredentials(config, api, config.security.internalUser),
    };
    globexQueues = topology.queues.map((q) => q.name).filter((name) => name.endsWith('.globex') || name.includes('.globex.'));
    expect(globexQueues).to.have.length(8); // in and out: queue, due, suspect; and their dead letters
    raw = await RawBroker.connect(config.broker.url);

    // acme's relay runs as acme's stage user, the shared fanout as the internal user. No globex
    // stage runs: whatever reached a globex queue would still be there.
    const byName = (name: string): LoadedStage => stages.find((s) => s.metadata.name === name) as LoadedStage;
    relayGroup = new StageGroup(asUser(url.stageAcme), [{ stage: byName('relay'), tenant: 'acme' }], log);
    fanoutGroup = new StageGroup(asUser(url.internal), [{ stage: byName('fanout') }], log);
    await relayGroup.start();
    await fanoutGroup.start();
  });

  after(async () => {
    held.open = true;
    await relayGroup?.stop();
    await fanoutGroup?.stop();
    await raw?.close();
    for (const user of users) await api.deleteUser(user);
    if (config) await teardown(config, stages?.map((s) => s.metadata) ?? []);
  });

  it('provisions users that exist, and stages of acme and of shared queues that consume as them', async () => {
    expect(users).to.deep.equal([
      `${config.prefix}.producer.acme`,
      `${config.prefix}.stage.acme`,
      `${config.prefix}.producer.globex`,
      `${config.prefix}.stage.globex`,
      `${config.prefix}.internal`,
    ]);
    for (const user of users) expect(await api.userExists(user), user).to.equal(true);
    expect(relayGroup.readiness()).to.deep.equal({ ready: true });
    expect(fanoutGroup.readiness()).to.deep.equal({ ready: true });
  });

  it("as acme's producer: no attempt puts anything in a globex queue; each is refused by the broker or lands in unroutable or dead letters", async () => {
    const producer = await AsUser.connect(url.producerAcme);
    const claim = { headers: { 'x-ojs-tenant': 'globex' } };
    const forged = (): ReturnType<typeof envelope> => envelope('in', 'globex');
    try {
      // Refused by the broker (403: no write permission on the exchange, or, for the delay
      // ladder, on the routing key).
      const refused: Record<string, string> = {
        'root exchange, x-ojs-tenant: globex': await producer.publish(names.root, 'in', forged().content, {
          ...forged().options,
          ...claim,
        }),
        "globex's tenant exchange, routing key of globex's queue": await producer.publish(
          names.tenantExchange('globex'),
          'in',
          forged().content,
          forged().options,
        ),
        'retry exchange, key to the due queue of globex': await producer.publish(
          names.retry,
          delayRoutingKey(0, names.dueQueue('in', 'globex')),
          forged().content,
          forged().options,
        ),
        'dead-letter exchange, key of a globex dead queue': await producer.publish(
          names.dlx,
          names.deadQueue('in', 'globex'),
          forged().content,
          forged().options,
        ),
      };
      for (const exchange of ['amq.direct', 'amq.fanout', 'amq.topic', 'amq.headers', 'amq.match']) {
        refused[exchange] = await producer.publish(exchange, 'in', forged().content, { ...forged().options, ...claim });
      }
      for (const queue of globexQueues) {
        refused[`default exchange, queue name ${queue}`] = await producer.publish('', queue, forged().content, forged().options);
      }
      for (const [attempt, outcome] of Object.entries(refused)) expect(outcome, attempt).to.match(/^refused: .*403 \(ACCESS-REFUSED\)/);

      // Refused by the broker (406: user_id is validated against the connection's user).
      for (const userId of [`${config.prefix}.producer.globex`, `${config.prefix}.stage.globex`, 'guest', config.security.internalUser]) {
        const withForgedUserId = envelope('in', 'acme', ['forged-user-id']);
        const outcome = await producer.publish(names.tenantExchange('acme'), 'in', withForgedUserId.content, {
          ...withForgedUserId.options,
          userId,
        });
        expect(outcome, `user_id ${userId}`).to.match(/^refused: .*406 \(PRECONDITION-FAILED\).*user_id property set to/);
      }

      // Confirmed, but routed by key within acme only: it reaches acme's queue, whose stage
      // dead-letters it (the job names tenant globex), never globex's.
      const ownExchange = envelope('in', 'globex', ['own-exchange']);
      expect(
        await producer.publish(names.tenantExchange('acme'), 'in', ownExchange.content, {
          ...ownExchange.options,
          userId: asUserName('producer'),
        }),
      ).to.equal('confirmed');
      const deadInAcme = await arrival(names.deadQueue('in', 'acme'), ownExchange.options.messageId as string);
      expect(deadInAcme.properties.headers).to.include({ 'x-ojs-error-type': 'INVALID_PAYLOAD' });

      // Confirmed, but `direct` binds shared queues only: kept in unroutable. Replaying it as the
      // operator (whom stages trust) would launder it into globex's queue: replay keeps it.
      const viaDirect = envelope('in', 'globex', ['via-direct']);
      expect(await producer.publish(names.direct, 'in', viaDirect.content, { ...viaDirect.options, ...claim })).to.equal('confirmed');
      await waitFor('the job kept in unroutable', async () => (await raw.count(names.unroutable)) === 1);
      expect(await replayUnroutable(config, log)).to.deep.equal({ replayed: 0, kept: 1 });
      const [kept] = await raw.drain(names.unroutable);
      expect(kept.properties.messageId).to.equal(viaDirect.options.messageId);

      expectGlobexUntouched(await globexCounts());
    } finally {
      await producer.close();
    }
  });

  it("as acme's producer on a shared queue: a job claiming globex is dead-lettered as TENANT_MISMATCH, byte for byte, and never run", async () => {
    const producer = await AsUser.connect(url.producerAcme);
    try {
      const claiming = envelope('jobs', 'globex', ['claims-globex']);
      const options = { ...claiming.options, userId: asUserName('producer') };
      expect(await producer.publish(names.direct, 'jobs', claiming.content, options)).to.equal('confirmed');
      const dead = await arrival(names.deadQueue('jobs'), options.messageId as string);
      expect(dead.properties.headers).to.include({ 'x-ojs-error-type': 'TENANT_MISMATCH' });
      expect(String(dead.properties.headers?.['x-ojs-error-message'])).to.contain('tenant "globex"').and.contain(asUserName('producer'));
      expect(dead.content.equals(claiming.content), 'the body as it came').to.equal(true);

      // Without a user_id nobody vouches for the job, even for the publisher's own tenant.
      const unsigned = envelope('jobs', 'acme', ['unsigned']);
      expect(await producer.publish(names.direct, 'jobs', unsigned.content, unsigned.options)).to.equal('confirmed');
      const deadUnsigned = await arrival(names.deadQueue('jobs'), unsigned.options.messageId as string);
      expect(deadUnsigned.properties.headers).to.include({ 'x-ojs-error-type': 'TENANT_MISMATCH' });
      expect(String(deadUnsigned.properties.headers?.['x-ojs-error-message'])).to.contain('no validated user_id');

      expectGlobexUntouched(await globexCounts());
      expect(await raw.count(names.queue('in', 'acme')), 'the fanout never ran them').to.equal(0);
    } finally {
      await producer.close();
    }
  });

  it("as acme's stage user: consuming, getting, purging or deleting a globex queue is refused by the broker", async () => {
    const stage = await AsUser.connect(url.stageAcme);
    try {
      // Something to lose: a job waits in globex's queue (published by the operator).
      const waiting = envelope('in', 'globex', ['waiting']);
      await raw.publish(names.root, 'in', waiting.content, waiting.options);
      for (const queue of globexQueues) {
        const outcomes = {
          consume: await stage.attempt((ch) => ch.consume(queue, () => undefined)),
          get: await stage.attempt((ch) => ch.get(queue)),
          purge: await stage.attempt((ch) => ch.purgeQueue(queue)),
          delete: await stage.attempt((ch) => ch.deleteQueue(queue)),
        };
        for (const [operation, outcome] of Object.entries(outcomes)) {
          expect(outcome, `${operation} ${queue}`).to.match(
            /^refused: .*403 \(ACCESS-REFUSED\) with message "ACCESS_REFUSED - access to queue/,
          );
        }
      }
      // Nor can it route globex's jobs to a queue of its own, or write where globex's jobs enter.
      const snoop = await stage.attempt(async (ch) => {
        const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true, durable: false });
        await ch.bindQueue(queue, names.tenantExchange('globex'), 'in');
      });
      expect(snoop, 'binding to a globex exchange').to.match(/^refused: .*403/);
      const job = envelope('in', 'acme', ['stage-forgery']);
      const retryToGlobex = await stage.publish(names.retry, delayRoutingKey(0, names.dueQueue('in', 'globex')), job.content, job.options);
      expect(retryToGlobex, 'retry key to a globex due queue (topic permission)').to.match(/^refused: .*403 .*access to topic/);
      expect(await stage.publish(names.tenantExchange('globex'), 'in', job.content, job.options)).to.match(/^refused: .*403/);
      expect(await stage.publish(names.root, 'in', job.content, job.options)).to.match(/^refused: .*403/);
      expect(await stage.attempt((ch) => ch.assertQueue(names.queue('in', 'acme')))).to.match(/^refused: .*403/, 'no configure');
      expect(await stage.attempt((ch) => ch.deleteQueue(names.dueQueue('in', 'acme')))).to.match(/^refused: .*403/, 'not even its own');

      const counts = await globexCounts();
      expect(counts[names.queue('in', 'globex')], "globex's job still waits").to.equal(1);
      expectGlobexUntouched({ ...counts, [names.queue('in', 'globex')]: 0 });
      await raw.drain(names.queue('in', 'globex'));
    } finally {
      await stage.close();
    }
  });

  it("runs acme's jobs end to end as acme's stage user: emits, a retry through the delay ladder, a dead letter, hand-backs", async () => {
    const publisher = await Publisher.connect(asUser(url.producerAcme), { log });
    try {
      const ok = await publisher.publish('in', { type: 'relay.me', args: ['e2e'], tenant: 'acme' });
      const output = await relayed('e2e');
      expect(output.properties.userId, 'emitted as the stage user').to.equal(asUserName('stage'));
      expect((JSON.parse(output.content.toString()) as Job).meta).to.deep.equal({ parent_id: ok });

      // Attempt 1 fails, waits 1 s in the ladder, comes back to `due`, fails again: dead letter.
      const failing = await publisher.publish('in', { type: 'relay.me', args: ['boom', 'throw'], tenant: 'acme' });
      const deadQueue = names.deadQueue('in', 'acme');
      await waitFor('the dead letter', async () => (await raw.count(deadQueue)) === 1);
      // The operator sends it back (stamped with the operator's user_id, which acme's stage
      // trusts): it runs again, and dies again the same way, not as TENANT_MISMATCH.
      expect(await retryDeadLetters(config, 'in', 'acme', log)).to.include({ retried: 1 });
      const dead = await arrival(deadQueue, failing);
      const deadJob = JSON.parse(dead.content.toString()) as Job;
      expect([deadJob.attempt, deadJob.error?.type]).to.deep.equal([2, 'TypeError']);
      expect(dead.properties.headers).to.include({ 'x-ojs-error-type': 'TypeError', 'x-ojs-attempt': 2 });
      expect(dead.properties.userId, 'dead-lettered by the stage').to.equal(asUserName('stage'));

      // Hand-backs republish the delivery's properties, the producer's user_id among them: the
      // stage's own is stamped instead, which the broker accepts.
      held.open = false;
      const [runner] = relayGroup.runners;
      await publisher.publish('in', { type: 'relay.me', args: ['first', 'hold'], tenant: 'acme' });
      await waitFor('the first job holding', () => held.active === 1);
      await publisher.publish('in', { type: 'relay.me', args: ['second'], tenant: 'acme' });
      await publisher.publish('in', { type: 'relay.me', args: ['third'], tenant: 'acme' });
      await waitFor('both prefetched', async () => (await raw.count(names.queue('in', 'acme'))) === 0);
      const givenBack = runner.stats.givenBack;
      await runner.pause();
      await waitFor('both handed back to due', async () => (await raw.count(names.dueQueue('in', 'acme'))) === 2);
      await waitFor('both counted as handed back', () => runner.stats.givenBack - givenBack === 2);
      held.open = true;
      await runner.resume();
      for (const value of ['first', 'second', 'third']) await relayed(value);
      expectGlobexUntouched(await globexCounts());
    } finally {
      held.open = true;
      await publisher.close();
    }
  });

  it("runs a shared-queue stage as the internal user: it fans acme's job out into acme's queue", async () => {
    const publisher = await Publisher.connect(asUser(url.producerAcme), { log });
    try {
      await publisher.publish('jobs', { type: 'fan', args: ['fanned'], tenant: 'acme' });
      const output = await relayed('fanned');
      expect(output.properties.userId).to.equal(asUserName('stage'));
    } finally {
      await publisher.close();
    }
  });

  it("refuses, before the broker does, a producer's job for another tenant; its publisher stays usable", async () => {
    const publisher = await Publisher.connect(asUser(url.producerAcme), { log });
    try {
      const refused = await publisher.publish('in', { type: 'relay.me', args: ['x'], tenant: 'globex' }).catch((err: unknown) => err);
      expect(refused).to.have.property('code', 'TENANT_MISMATCH');
      const shared = await publisher.publish('jobs', { type: 'fan', args: ['x'], tenant: 'globex' }).catch((err: unknown) => err);
      expect(shared).to.have.property('code', 'TENANT_MISMATCH');
      await publisher.publish('in', { type: 'relay.me', args: ['after-refusal'], tenant: 'acme' });
      await relayed('after-refusal');
      expectGlobexUntouched(await globexCounts());
    } finally {
      await publisher.close();
    }
  });

  it("lets acme's producer schedule jobs for acme by the delay ladder, and refuses every key to a queue not acme's own due queue", async () => {
    const publisher = await Publisher.connect(asUser(url.producerAcme), { log });
    const producer = await AsUser.connect(url.producerAcme);
    try {
      const publishedAt = Date.now();
      const id = await publisher.publish('in', {
        type: 'relay.me',
        args: ['scheduled'],
        tenant: 'acme',
        scheduled_at: new Date(publishedAt + 2000).toISOString(),
      });
      const output = await relayed('scheduled');
      expect(Date.now() - publishedAt, 'relayed after its time').to.be.at.least(2000);
      expect((JSON.parse(output.content.toString()) as Job).meta).to.deep.equal({ parent_id: id });
      // Into a shared queue too, whose stage (the internal user) fans it out to acme.
      await publisher.publish('jobs', {
        type: 'fan',
        args: ['fanned-later'],
        tenant: 'acme',
        scheduled_at: new Date(Date.now() + 1000).toISOString(),
      });
      await relayed('fanned-later');
      const forGlobex = await publisher
        .publish('in', { type: 'relay.me', args: ['x'], tenant: 'globex', scheduled_at: new Date(Date.now() + 1000).toISOString() })
        .catch((err: unknown) => err);
      expect(forGlobex, 'refused before the broker').to.have.property('code', 'TENANT_MISMATCH');

      // By hand on the producer's own connection: the broker takes ladder keys that end in one of
      // acme's due queues (the topic permission of the retry exchange), and no other.
      const byHand = envelope('in', 'acme', ['by-hand']);
      const ownKey = delayRoutingKey(1000, names.dueQueue('in', 'acme'));
      expect(await producer.publish(names.retry, ownKey, byHand.content, { ...byHand.options, userId: asUserName('producer') })).to.equal(
        'confirmed',
      );
      await relayed('by-hand');
      for (const queue of [
        names.dueQueue('in', 'globex'),
        names.dueQueue('out', 'globex'),
        names.suspectQueue('in', 'globex'),
        names.queue('in', 'globex'),
        names.suspectQueue('in', 'acme'),
        names.queue('in', 'acme'),
        names.deadQueue('in', 'acme'),
      ]) {
        const forged = envelope('in', 'globex', ['scheduled-forgery']);
        const outcome = await producer.publish(names.retry, delayRoutingKey(1000, queue), forged.content, forged.options);
        expect(outcome, queue).to.match(/^refused: .*403 \(ACCESS-REFUSED\).*access to topic/);
      }
      expectGlobexUntouched(await globexCounts());
    } finally {
      await publisher.close();
      await producer.close();
    }
  });

  it("dead-letters as TENANT_MISMATCH a job on acme's queue from a user that may write there but is not acme's", async () => {
    // Say an operator granted a monitoring user write access to acme's exchange: its jobs do not
    // speak for acme.
    const rogue = `${config.prefix}.rogue`;
    users.push(rogue);
    await api.putUser(rogue, 'rogue-password');
    await api.putPermissions('/', rogue, { configure: '', write: `^${config.prefix}\\.tenant\\.acme$`, read: '' });
    const rogueUrl = new URL(config.broker.url);
    rogueUrl.username = rogue;
    rogueUrl.password = 'rogue-password';
    const as = await AsUser.connect(rogueUrl.toString());
    try {
      const job = envelope('in', 'acme', ['rogue']);
      expect(await as.publish(names.tenantExchange('acme'), 'in', job.content, { ...job.options, userId: rogue })).to.equal('confirmed');
      const dead = await arrival(names.deadQueue('in', 'acme'), job.options.messageId as string);
      expect(dead.properties.headers).to.include({ 'x-ojs-error-type': 'TENANT_MISMATCH' });
    } finally {
      await as.close();
    }
  });

  it("reports batched jobs to the tracking stream as the producer, stage and internal users; a refused one as dead, with the queue's tenant", async () => {
    const publisher = await Publisher.connect(asUser(url.producerAcme), { log });
    const rogue = `${config.prefix}.rogue-batch`;
    users.push(rogue);
    await api.putUser(rogue, 'rogue-password');
    await api.putPermissions('/', rogue, { configure: '', write: `^${config.prefix}\\.tenant\\.acme$`, read: '' });
    const rogueUrl = new URL(config.broker.url);
    rogueUrl.username = rogue;
    rogueUrl.password = 'rogue-password';
    const as = await AsUser.connect(rogueUrl.toString());
    try {
      // The producer's `created` report, the internal user's (shared fanout) and acme's stage
      // user's (relay) settlement reports: each was refused by the broker before the tracking
      // exchange (reports went through the default exchange, which these users may not write).
      const root = await publisher.publish('jobs', { type: 'fan', args: ['batched'], tenant: 'acme', batch: 'tu-batch' });
      const output = await relayed('batched');
      const relayedJob = JSON.parse(output.content.toString()) as Job;
      expect(relayedJob.meta.batch).to.equal('tu-batch');
      // A rogue user's batched job on acme's queue: refused (TENANT_MISMATCH), and reported dead
      // so that its batch does not wait for it, under acme (the queue's tenant), not its claim.
      const claim = createJob({ type: 'relay.me', args: ['rogue'], meta: { batch: 'tu-rogue' } }, { queue: 'in', tenant: 'acme' });
      const wire = toWire(claim, { tenantHeader: config.tenantHeader });
      expect(await as.publish(names.tenantExchange('acme'), 'in', wire.content, { ...wire.options, userId: rogue })).to.equal('confirmed');
      await arrival(names.deadQueue('in', 'acme'), claim.id);
      const fold = await waitFor(
        'every report on the stream',
        async () => {
          const read = await readTracking(config, log);
          const fanned = read.job(root);
          const done = fanned?.cls === 'completed' && [...fanned.children].every((child) => read.job(child)?.cls === 'completed');
          return done && read.job(claim.id)?.cls === 'dead' ? read : undefined;
          // Each probe reads the whole stream on a connection of its own: not every 50 ms.
        },
        15_000,
        250,
      );
      const fanned = fold.job(root)!;
      expect(fanned).to.deep.include({ created: true, tenant: 'acme' });
      expect(fanned.reports.map((r) => [r.stage, r.outcome])).to.deep.equal([['fanout', 'completed']]);
      const [child] = [...fanned.children];
      expect(fold.job(child)!.reports.map((r) => [r.stage, r.outcome, r.tenant])).to.deep.equal([['relay', 'completed', 'acme']]);
      expect(fold.job(child)!.children.has(relayedJob.id)).to.equal(true);
      const refused = fold.job(claim.id)!;
      expect(refused.reports.map((r) => [r.outcome, r.tenant, r.error?.type])).to.deep.equal([['dead', 'acme', 'TENANT_MISMATCH']]);
    } finally {
      await as.close();
      await publisher.close();
    }
  });

  it("parks acme's jobs as acme's stage user while acme is paused, only under acme's key; resume sends them on", async () => {
    const publisher = await Publisher.connect(asUser(url.producerAcme), { log });
    const stage = await AsUser.connect(url.stageAcme);
    try {
      await pauseTenant(config, 'acme', log);
      await waitFor(
        'the relay to see the pause',
        async () => (await relayGroup.directives.verdict({ tenant: 'acme', meta: {} })) === 'park-tenant',
      );
      await publisher.publish('in', { type: 'relay.me', args: ['parked'], tenant: 'acme' });
      const [parked] = await waitFor('the job parked', async () => {
        const messages = await raw.drain(names.parked);
        return messages.length > 0 ? messages : undefined;
      });
      expect(parked.fields.routingKey).to.equal('acme');
      expect(parked.properties.userId, 'parked by the stage user').to.equal(asUserName('stage'));
      // Put back (as the operator: guest may not stamp the stage's user_id) for `resume` to find.
      const { userId: _stageUser, ...properties } = parked.properties;
      void _stageUser;
      await raw.publish(names.park, 'acme', parked.content, properties);
      // The park exchange's topic permission: acme's key only.
      const job = envelope('in', 'globex', ['forged-park']);
      for (const key of ['globex', '_', '#']) {
        expect(await stage.publish(names.park, key, job.content, job.options), key).to.match(/^refused: .*ACCESS_REFUSED/);
      }
      expect(await resumeTenant(config, 'acme', log)).to.include({ moved: 1, kept: 0 });
      await relayed('parked');
      expectGlobexUntouched(await globexCounts());
    } finally {
      await resumeTenant(config, 'acme', log).catch(() => undefined);
      await stage.close();
      await publisher.close();
    }
  });

  it("ignores tracking records a tenant user writes for another tenant's batch, and directives from anyone but the operator", async () => {
    const stage = await AsUser.connect(url.stageAcme);
    try {
      const forged = (record: Record<string, unknown>): Buffer =>
        Buffer.from(JSON.stringify({ id: randomUUID(), at: new Date().toISOString(), ...record }));
      const sent = [
        forged({ kind: 'created', job: 'forged-root', batch: 'tu-globex', tenant: 'globex', queue: 'in' }),
        forged({
          kind: 'settled',
          job: 'forged-root',
          batch: 'tu-globex',
          tenant: 'globex',
          stage: 'relay',
          queue: 'in',
          outcome: 'dead',
          attempt: 1,
        }),
        forged({ kind: 'directive', action: 'cancel', batch: 'tu-acme-ok' }),
        // Its own tenant's record is taken.
        forged({ kind: 'created', job: 'own-root', batch: 'tu-acme-ok', tenant: 'acme', queue: 'in' }),
      ];
      for (const content of sent) {
        expect(await stage.publish(names.tracking, '', content, { contentType: 'application/json', userId: asUserName('stage') })).to.equal(
          'confirmed',
        );
      }
      const fold = await readTracking(config, log);
      expect(fold.batch('tu-globex')).to.equal(undefined);
      expect(fold.job('forged-root')).to.equal(undefined);
      expect(fold.batch('tu-acme-ok')).to.deep.include({ tenant: 'acme', cancelled: false });
      expect(fold.job('own-root')?.created).to.equal(true);
    } finally {
      await stage.close();
    }
  });

  it('gives tenant users the tracking exchange, never the default exchange (which reaches every queue by name)', async () => {
    const producer = await AsUser.connect(url.producerAcme);
    const stage = await AsUser.connect(url.stageAcme);
    try {
      const job = envelope('in', 'globex', ['by-name']);
      for (const as of [producer, stage]) {
        expect(await as.publish('', names.queue('in', 'globex'), job.content, job.options)).to.match(
          /^refused: .*ACCESS_REFUSED.*amq\.default/,
        );
        expect(await as.publish('', names.tracking, Buffer.from('{}'))).to.match(/^refused: .*ACCESS_REFUSED/);
        // The stream, through its exchange: the one way in. (Binding it elsewhere needs read on a source: none.)
        expect(await as.attempt((ch) => ch.bindQueue(names.tracking, names.tenantExchange('acme'), 'x'))).to.match(
          /^refused: .*ACCESS_REFUSED/,
        );
      }
      expectGlobexUntouched(await globexCounts());
    } finally {
      await producer.close();
      await stage.close();
    }
  });

  it("keeps, on dead retry, a dead letter nobody entitled put in acme's dead letters, and one refused as TENANT_MISMATCH", async () => {
    // The dead-letter exchange is direct: its routing keys cannot be restricted, so a user that
    // may write dead letters at all can write them into any tenant's dead-letter queue.
    const forger = `${config.prefix}.forger`;
    users.push(forger);
    await api.putUser(forger, 'forger-password');
    await api.putPermissions('/', forger, { configure: '', write: `^${config.prefix}\\.(dlx|tenant\\.acme)$`, read: '' });
    const forgerUrl = new URL(config.broker.url);
    forgerUrl.username = forger;
    forgerUrl.password = 'forger-password';
    const as = await AsUser.connect(forgerUrl.toString());
    const deadIn = names.deadQueue('in', 'acme');
    try {
      await raw.drain(deadIn);
      const forged = envelope('in', 'acme', ['forged-dead-letter']);
      expect(await as.publish(names.dlx, deadIn, forged.content, { ...forged.options, userId: forger })).to.equal('confirmed');
      const mismatch = envelope('in', 'acme', ['mismatch']);
      expect(await as.publish(names.tenantExchange('acme'), 'in', mismatch.content, { ...mismatch.options, userId: forger })).to.equal(
        'confirmed',
      );
      await waitFor('both dead letters in acme dead letters', async () => (await raw.count(deadIn)) === 2);
      // `dead retry` republishes as the operator, whom every stage trusts: it must not launder them.
      expect(await retryDeadLetters(config, 'in', 'acme', log)).to.deep.equal({ retried: 0, kept: 2 });
      expect(await raw.count(deadIn)).to.equal(2);
      expect(await raw.count(names.queue('in', 'acme'))).to.equal(0);
      await raw.drain(deadIn);
    } finally {
      await as.close();
    }
  });

  /** `<prefix>.<role>.acme`. */
  function asUserName(role: 'producer' | 'stage'): string {
    return `${config.prefix}.${role}.acme`;
  }
});

describe('stagecoach provision and credentials (security.tenantUsers)', function () {
  this.timeout(60_000);
  let file: ConfigFile;
  let api: ManagementClient;
  const users = (): string[] => [
    `${file.config.prefix}.producer.acme`,
    `${file.config.prefix}.stage.acme`,
    file.config.security.internalUser,
  ];

  before(async () => {
    file = await writeConfigFile({ security: { tenantUsers: true }, tenants: ['acme'], queues: { in: {} } }, [], 'tenant-users');
    api = new ManagementClient(file.config.broker.management);
  });

  after(async () => {
    if (api) for (const user of users()) await api.deleteUser(user);
    await file?.remove();
  });

  it('provisions the users; credentials prints only the URL, never logs the password, and a fresh one retires the last', async () => {
    const provisioned = await runCli(['provision', '--config', file.file]);
    expect(provisioned.code, provisioned.stderr).to.equal(0);
    expect(provisioned.stdout).to.match(
      /^declared \d+ exchanges, \d+ queues, \d+ bindings \(missing or different before: \d+, \d+, \d+\)\nqueue settings: \d+ policies set, \d+ removed\nset the permissions of 3 broker users/,
    );
    for (const user of users()) expect(await api.userExists(user), user).to.equal(true);

    const first = await runCli(['credentials', 'acme', '--role', 'stage', '--config', file.file]);
    expect(first.code, first.stderr).to.equal(0);
    const lines = first.stdout.split('\n');
    expect(lines).to.have.length(2);
    expect(lines[1]).to.equal('');
    const stageUrl = new URL(lines[0]);
    expect(decodeURIComponent(stageUrl.username)).to.equal(`${file.config.prefix}.stage.acme`);
    expect(stageUrl.password).to.have.length.greaterThan(20);
    expect(first.stderr).not.to.contain(stageUrl.password);
    expect(first.stderr).to.contain('fresh password set');
    const connection = await amqplib.connect(lines[0]);
    await connection.close();

    // Provisioning again keeps the password: running stages stay logged in.
    expect((await runCli(['provision', '--config', file.file])).code).to.equal(0);
    await (await amqplib.connect(lines[0])).close();

    const second = await runCli(['credentials', 'acme', '--role', 'stage', '--config', file.file]);
    expect(second.code, second.stderr).to.equal(0);
    expect(second.stdout.trim()).not.to.equal(lines[0]);
    const old = await amqplib.connect(lines[0]).then(
      (c) => c.close().then(() => 'connected'),
      (err: Error) => err.message,
    );
    expect(old).to.match(/ACCESS_REFUSED|ACCESS-REFUSED/);

    const internal = await runCli(['credentials', '--role', 'internal', '--config', file.file]);
    expect(internal.code, internal.stderr).to.equal(0);
    expect(decodeURIComponent(new URL(internal.stdout.trim()).username)).to.equal(file.config.security.internalUser);
  });

  it('publishes as the producer for its own tenant, and refuses (exit 2) another tenant', async () => {
    const { stdout } = await runCli(['credentials', 'acme', '--config', file.file]);
    const producerUrl = stdout.trim();
    expect(decodeURIComponent(new URL(producerUrl).username)).to.equal(`${file.config.prefix}.producer.acme`);
    const own = await runCli(['publish', 'in', '--type', 't', '--tenant', 'acme', '--config', file.file], { AMQP_URL: producerUrl });
    expect(own.code, own.stderr).to.equal(0);
    const [message] = await file.raw.drain(file.names.queue('in', 'acme'));
    expect(message.properties.messageId).to.equal(own.stdout.trim());
    expect(message.properties.userId).to.equal(`${file.config.prefix}.producer.acme`);
    const other = await runCli(['publish', 'in', '--type', 't', '--tenant', 'globex', '--config', file.file], { AMQP_URL: producerUrl });
    expect(other.code).to.equal(2);
    expect(other.stderr).to.contain('publishes for tenant "acme" only');
  });

  it('refuses credentials for a user provision did not create, and an unknown role', async () => {
    const missing = await runCli(['credentials', 'initech', '--config', file.file]);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.contain(`no broker user "${file.config.prefix}.producer.initech"`);
    expect(await api.userExists(`${file.config.prefix}.producer.initech`)).to.equal(false);
    const role = await runCli(['credentials', 'acme', '--role', 'admin', '--config', file.file]);
    expect(role.code).to.equal(2);
    expect(role.stderr).to.contain('--role must be producer, stage, internal, http or viewer');
  });
});
