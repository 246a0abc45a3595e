import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BroadcastChannel } from 'node:worker_threads';
import type { GetMessage } from 'amqplib';
import { expect } from 'chai';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { EnqueueRefusedError } from '../../src/errors/errors.js';
import { OJS_HEADERS } from '../../src/job/amqp-mapping.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import type { EnqueueMiddleware, Middleware } from '../../src/stage/middleware/middleware.types.js';
import { loadStage, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { around, JOURNAL, note, type Note } from '../fixtures/middleware-stages.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'middleware' }, 'error');
const body = (m: GetMessage): Job => JSON.parse(m.content.toString()) as Job;

/** The process-wide middleware of the group: outside the stage's own. */
const refuseForbidden: EnqueueMiddleware = (outgoing, next) => {
  note({ id: String(outgoing.meta.parent_id), attempt: 0 }, `enqueue group ${outgoing.type}`);
  if (outgoing.type === 'forbidden')
    throw new EnqueueRefusedError(`jobs of type "forbidden" may not be emitted`, outgoing.queue, outgoing.id);
  outgoing.headers['x-group'] = 'yes';
  return next();
};
const groupMiddleware: Middleware = { execution: [around('group')], enqueue: [refuseForbidden] };

/** A producer's middleware: adds a header and meta, refuses a job type. */
const producerMiddleware: Middleware = {
  enqueue: [
    async (outgoing, next) => {
      if (outgoing.type === 'guard.secret')
        throw new EnqueueRefusedError('guard.secret jobs are not to be published', outgoing.queue, outgoing.id);
      outgoing.headers['x-origin'] = 'billing';
      outgoing.meta.origin = 'billing-service';
      return next();
    },
  ],
};

function setup(threads?: number): {
  config: CompiledConfig;
  start: () => Promise<void>;
  stop: () => Promise<void>;
  ctx: () => { group: StageGroup; raw: RawBroker; publisher: Publisher; names: BrokerNames; notes: Note[] };
} {
  const config = withTestConfig(
    {
      tenants: ['acme'],
      queues: { guard_in: { default_retry: { max_attempts: 2, initial_interval: 'PT1S', jitter: false } } },
      stages: { guarded: { module: './middleware-stages.js', concurrency: 1, ...(threads === undefined ? {} : { threads }) } },
    },
    path.join(here, '../fixtures/config.json'),
  );
  const notes: Note[] = [];
  let stage: LoadedStage;
  let group: StageGroup;
  let raw: RawBroker;
  let publisher: Publisher;
  let journal: BroadcastChannel;
  return {
    config,
    start: async () => {
      journal = new BroadcastChannel(JOURNAL);
      journal.onmessage = (event: unknown) => notes.push((event as { data: Note }).data);
      stage = await loadStage(config, 'guarded');
      group = new StageGroup(config, [{ stage, tenant: 'acme' }], log, { middleware: groupMiddleware });
      await group.start(true);
      raw = await RawBroker.connect(config.broker.url);
      publisher = await Publisher.connect(config, { log, middleware: producerMiddleware });
    },
    stop: async () => {
      await publisher?.close();
      await group?.stop();
      await raw?.close();
      journal?.close();
      await teardown(config, [stage.metadata]);
    },
    ctx: () => ({ group, raw, publisher, names: new BrokerNames(config.prefix), notes }),
  };
}

/** What was noted for one job, in order. */
const of = (notes: readonly Note[], id: string): string[] => notes.filter((n) => n.job === id).map((n) => n.what);

describe('middleware around a real stage', function () {
  this.timeout(60000);

  describe('on the main thread', () => {
    const { start, stop, ctx } = setup();
    const output = (): string => ctx().names.queue('guard_out', 'acme');
    const outputs: Job[] = [];
    const outputsOf = async (parent: string, count = 1): Promise<GetMessage[]> => {
      const found: GetMessage[] = [];
      await waitFor(`${count} output(s) of ${parent}`, async () => {
        for (const message of await ctx().raw.drain(output())) {
          outputs.push(body(message));
          if (body(message).meta.parent_id === parent) found.push(message);
        }
        return found.length >= count;
      });
      return found;
    };
    const publish = (mode: string): Promise<string> => ctx().publisher.publish('guard_in', { type: 'guard', args: [mode], tenant: 'acme' });

    before(start);
    after(stop);

    it("runs the group's execution middleware outside the stage's, in registration order, with the emit's enqueue middleware inside the handler", async () => {
      const id = await publish('plain');
      const [message] = await outputsOf(id);
      await waitFor('the last note', () => of(ctx().notes, id).includes('<group'));
      expect(of(ctx().notes, id)).to.deep.equal([
        'group>',
        'stage-outer>',
        'decide plain',
        'stage-inner>',
        'handler',
        'enqueue group guarded.done',
        'enqueue stage guarded.done',
        '<stage-inner',
        '<stage-outer',
        '<group',
      ]);
      // What both enqueue chains added arrived with the emitted job; what the producer's added, with its input.
      const emitted = message as GetMessage;
      expect(emitted.properties.headers?.['x-group']).to.equal('yes');
      expect(emitted.properties.headers?.['x-stamped-by']).to.equal('guarded');
      expect(body(emitted).meta.stamped).to.equal(true);
      expect(body(emitted).args).to.deep.equal(['plain', 'billing', 'billing-service', 1]);
    });

    it('settles a short-circuited job as the middleware decided: completed without the handler, or discarded', async () => {
      const runner = ctx().group.runners[0];
      const before = { ...runner?.stats };
      const skipped = await publish('skip');
      const discarded = await publish('discard');
      await waitFor(
        'both settled, and noted',
        () =>
          runner?.stats.completed === (before.completed ?? 0) + 1 &&
          runner.stats.discarded === (before.discarded ?? 0) + 1 &&
          of(ctx().notes, skipped).includes('<group') &&
          of(ctx().notes, discarded).includes('<group'),
      );
      expect(of(ctx().notes, skipped)).to.deep.equal(['group>', 'stage-outer>', 'decide skip', '<stage-outer', '<group']);
      expect(of(ctx().notes, discarded)).to.deep.equal(['group>', 'stage-outer>', 'decide discard', '<stage-outer', '<group']);
      expect(runner?.stats.retried).to.equal(before.retried);
      expect(runner?.stats.deadLettered).to.equal(before.deadLettered);
      expect(outputs.filter((job) => [skipped, discarded].includes(String(job.meta.parent_id)))).to.deep.equal([]);
    });

    it('retries a job whose middleware threw, as it retries a handler error', async () => {
      const id = await publish('flaky');
      const [message] = await outputsOf(id);
      expect(body(message as GetMessage).args).to.deep.equal(['flaky', 'billing', 'billing-service', 2]);
      const notes = ctx().notes.filter((n) => n.job === id);
      expect(notes.filter((n) => n.what === 'decide flaky').map((n) => n.attempt)).to.deep.equal([1, 2]);
      expect(notes.filter((n) => n.what === 'handler').map((n) => n.attempt)).to.deep.equal([2]);
    });

    it('refuses an emit through enqueue middleware: ctx.emit rejects with the clear error and nothing is published', async () => {
      const id = await publish('emit-forbidden');
      const dead = ctx().names.deadQueue('guard_in', 'acme');
      const [letter] = await waitFor('the dead letter', async () => {
        const found = await ctx().raw.drain(dead);
        return found.length > 0 ? found : undefined;
      });
      expect(letter?.properties.headers?.[OJS_HEADERS.errorMessage]).to.equal('jobs of type "forbidden" may not be emitted');
      expect(of(ctx().notes, id)).to.include('refused EnqueueRefusedError: jobs of type "forbidden" may not be emitted');
      // The group's middleware refused it: the stage's never saw it, and no queue did.
      expect(of(ctx().notes, id)).to.not.include('enqueue stage forbidden');
      for (const message of await ctx().raw.drain(output())) outputs.push(body(message));
      expect(outputs.filter((job) => job.meta.parent_id === id)).to.deep.equal([]);
    });

    it("refuses a producer's job through Publisher middleware: publish() rejects and nothing reaches the queue", async () => {
      const refused = await ctx()
        .publisher.publish('guard_in', { type: 'guard.secret', args: ['plain'], tenant: 'acme' })
        .then(
          () => expect.fail('publish() resolved'),
          (err: unknown) => err,
        );
      expect(refused).to.be.instanceOf(EnqueueRefusedError);
      expect((refused as Error).message).to.equal('guard.secret jobs are not to be published');
      const refusedId = (refused as EnqueueRefusedError).jobId as string;
      // One consumer, one at a time, in order: a job published after it is handled after it would have been.
      const after = await publish('plain');
      await outputsOf(after);
      expect(of(ctx().notes, refusedId)).to.deep.equal([]);
    });
  });

  describe('with the stage in a worker thread', () => {
    const { start, stop, ctx } = setup(1);
    before(start);
    after(stop);

    it("runs the stage's middleware in the thread, around its handler, and the group's on the main thread around that", async () => {
      const id = await ctx().publisher.publish('guard_in', { type: 'guard', args: ['plain'], tenant: 'acme' });
      await waitFor('the job through every middleware', () => of(ctx().notes, id).includes('<group'));
      const where = (what: string): boolean | undefined => ctx().notes.find((n) => n.job === id && n.what === what)?.main;
      for (const what of ['group>', '<group', 'enqueue group guarded.done', 'enqueue stage guarded.done'])
        expect(where(what), what).to.equal(true);
      for (const what of ['stage-outer>', 'decide plain', 'stage-inner>', 'handler', '<stage-inner', '<stage-outer']) {
        expect(where(what), what).to.equal(false);
      }
      // Within the thread, the stage's chain keeps its order.
      expect(of(ctx().notes, id).filter((what) => !what.includes('group') && !what.startsWith('enqueue'))).to.deep.equal([
        'stage-outer>',
        'decide plain',
        'stage-inner>',
        'handler',
        '<stage-inner',
        '<stage-outer',
      ]);
      const emitted = await waitFor('the output', async () => {
        const found = await ctx().raw.drain(ctx().names.queue('guard_out', 'acme'));
        return found.length > 0 ? found : undefined;
      });
      expect(emitted[0]?.properties.headers?.['x-stamped-by']).to.equal('guarded');
      expect(emitted[0]?.properties.headers?.['x-group']).to.equal('yes');
    });
  });
});
