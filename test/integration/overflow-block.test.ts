import path from 'node:path';
import { expect } from 'chai';
import { QueueFullError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'overflow-block' }, 'error');
const TEST_STAGES = path.join(REPO_ROOT, 'dist/test/fixtures/test-stages.js');
const RELAY = [{ name: 'relay', input: 'in', outputs: ['out'] }];

/** Settles when `promise` does, recording when; `settled` stays undefined until then. */
function watch<T>(promise: Promise<T>): { settled?: { at: number; error?: unknown } } {
  const watched: { settled?: { at: number; error?: unknown } } = {};
  promise.then(
    () => (watched.settled = { at: Date.now() }),
    (error: unknown) => (watched.settled = { at: Date.now(), error }),
  );
  return watched;
}

/**
 * `overflow_policy` `block` against the broker: the queue is bounded by a `reject-publish`
 * policy as for `reject`, and the producer waits for room instead of failing at once.
 */
describe('overflow_policy block: producers wait for room, up to block_timeout', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let publisher: Publisher;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', { name: 'globex', queues: { out: { block_timeout: 'PT1S' } } }],
        queues: { out: { max_size: 5, overflow_policy: 'block', block_timeout: 'PT20S' } },
      },
      RELAY,
      'overflow-block',
    );
    publisher = await Publisher.connect(project.config, { log });
  });

  after(async () => {
    await publisher?.close();
    await project?.remove();
  });

  it('a publisher of 8 jobs into a queue of max_size 5 drained slowly: all 8 arrive, none refused, each publish resolved only once there was room', async () => {
    const { names, raw } = project;
    const queue = names.queue('out', 'acme');
    const ids: string[] = [];
    const publish = async (i: number): Promise<string> => publisher.publish('out', { type: 'doc', args: [i], tenant: 'acme' });
    for (let i = 1; i <= 5; i++) ids.push(await publish(i));
    expect(await raw.count(queue)).to.equal(5);

    const sixth = publish(6);
    const watched = watch(sixth);
    // Refused and tried again several times (50 ms doubling), without failing.
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(watched.settled, 'the 6th publish while the queue is full').to.equal(undefined);
    expect(await raw.count(queue)).to.equal(5);

    // The consumer: one job every 250 ms. askedAt[k]: when the k-th take was asked for (1-based).
    const askedAt: number[] = [0];
    const taken: string[] = [];
    let draining = true;
    const consumer = (async () => {
      while (draining || taken.length < 8) {
        askedAt.push(Date.now());
        const message = await raw.takeOne(queue);
        if (message === undefined) askedAt.pop();
        else taken.push(String(message.properties.messageId));
        if (taken.length === 8) return;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();

    const resolvedAt: number[] = [];
    ids.push(await sixth);
    resolvedAt[6] = Date.now();
    for (let i = 7; i <= 8; i++) {
      ids.push(await publish(i));
      resolvedAt[i] = Date.now();
    }
    draining = false;
    await waitFor('the consumer taking all 8 jobs', () => taken.length === 8, 20_000);
    await consumer;

    expect(taken).to.have.members(ids);
    expect(new Set(taken).size).to.equal(8);
    // A publish beyond the 5th can only be confirmed once the broker freed a place: after the take that made room was asked for.
    for (let i = 6; i <= 8; i++)
      expect(resolvedAt[i], `publish ${i} resolved after take ${i - 5} was asked`).to.be.at.least(askedAt[i - 5]);
    expect(await raw.count(queue)).to.equal(0);
  });

  it('nobody drains: the publish fails with QUEUE_FULL after the tenant’s block_timeout (PT1S), naming the queue and how long it waited', async () => {
    const { names, raw } = project;
    const queue = names.queue('out', 'globex');
    for (let i = 1; i <= 5; i++) await publisher.publish('out', { type: 'doc', args: [i], tenant: 'globex' });
    const started = Date.now();
    const refused = await publisher.publish('out', { type: 'doc', args: [6], tenant: 'globex' }).catch((err: unknown) => err);
    const waited = Date.now() - started;
    expect(refused).to.be.instanceOf(QueueFullError);
    expect(refused).to.include({ code: 'QUEUE_FULL', queue: 'out', tenant: 'globex', transient: false });
    expect(waited, 'ms before the publish failed').to.be.within(1000, 5000);
    expect((refused as QueueFullError).message).to.match(
      /^queue "out" of tenant "globex" is full \(QUEUE_FULL: max_size reached, overflow_policy block\): no room within block_timeout PT1S \(waited 1\.\d s, \d+ tries\), nothing was enqueued$/,
    );
    expect(await raw.count(queue)).to.equal(5);
  });
});

describe('overflow_policy block: a stage emitting into a full queue holds its input job until there is room', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let publisher: Publisher;
  let group: StageGroup;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme'],
        queues: {
          in: { default_retry: { max_attempts: 1 } },
          out: { max_size: 2, overflow_policy: 'block', block_timeout: 'PT20S' },
        },
        stages: { relay: { module: TEST_STAGES, concurrency: 1, prefetch: 1 } },
      },
      RELAY,
      'overflow-block-stage',
    );
    publisher = await Publisher.connect(project.config, { log });
    const [relay] = await loadAllStages(project.config);
    group = new StageGroup(project.config, [{ stage: relay, tenant: 'acme' }], log);
    await group.start();
  });

  after(async () => {
    await publisher?.close();
    await group?.stop(5000);
    await project?.remove();
  });

  it('the third job waits unacknowledged (no attempt failed, nothing dead-lettered) and is relayed once a job of the full queue is taken', async () => {
    const { names, raw } = project;
    const [input, out, dead] = [names.queue('in', 'acme'), names.queue('out', 'acme'), names.deadQueue('in', 'acme')];
    for (const value of ['a', 'b', 'c']) await publisher.publish('in', { type: 'relay.me', args: [value], tenant: 'acme' });
    await waitFor('two jobs relayed into out (full)', async () => (await raw.count(out)) === 2 && (await raw.count(input)) === 0);
    // The third is held by the relay, its emit refused and tried again: it stays in flight, not failed.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await raw.counts([input, out, dead])).to.deep.equal({ [input]: 0, [out]: 2, [dead]: 0 });
    expect(group.runners[0].stats).to.include({ completed: 2, deadLettered: 0, retried: 0 });

    const first = await raw.takeOne(out);
    await waitFor('the held job relayed once out had room', () => group.runners[0].stats.completed === 3);
    const rest = await raw.drain(out);
    const relayed = [first, ...rest].map((message) => (JSON.parse(String(message?.content)) as { args: string[] }).args[0]);
    expect(relayed).to.have.length(3);
    expect(relayed.map((value) => value.slice(0, 1))).to.deep.equal(['a', 'b', 'c']);
    expect(await raw.count(dead)).to.equal(0);
  });
});
