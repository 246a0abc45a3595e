import { expect } from 'chai';
import { EnqueueRefusedError, StagecoachError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import type { HeaderValue, Job } from '../../src/job/job.types.js';
import { runEnqueueChain, type PublishStep } from '../../src/stage/middleware/enqueue-chain.js';
import { withExecutionMiddleware } from '../../src/stage/middleware/execution-chain.js';
import type { EnqueueMiddleware, ExecutionMiddleware } from '../../src/stage/middleware/middleware.types.js';
import { Stage } from '../../src/stage/stage.decorator.js';
import { exploreStages, stageMiddlewareOf } from '../../src/stage/stage-explorer.js';
import type { StageContext, StageHandler } from '../../src/stage/stage.types.js';
import { StageHarness } from '../../src/testing/stage-harness.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected a rejection'),
    (err: unknown) => err,
  );
}

const ctx = {} as StageContext;
const job = (): Job => createJob({ type: 'doc.scan', args: [1] }, { queue: 'documents', tenant: 'acme' });

/** Execution middleware that records its name before and after `next()`. */
function around(name: string, trace: string[]): ExecutionMiddleware {
  return async (_job, _ctx, next) => {
    trace.push(`${name}>`);
    const result = await next();
    trace.push(`<${name}`);
    return result;
  };
}

describe('execution middleware chain', () => {
  it('runs the first registered outermost, the handler innermost, and hands the result back out', async () => {
    const trace: string[] = [];
    const handler: StageHandler = {
      handle: () => {
        trace.push('handler');
        return Promise.resolve('done');
      },
    };
    const wrapped = withExecutionMiddleware(handler, [around('a', trace), around('b', trace), around('c', trace)]);
    expect(await wrapped.handle(job(), ctx)).to.equal('done');
    expect(trace).to.deep.equal(['a>', 'b>', 'c>', 'handler', '<c', '<b', '<a']);
  });

  it('is the handler itself without middleware', () => {
    const handler: StageHandler = { handle: () => undefined };
    expect(withExecutionMiddleware(handler, [])).to.equal(handler);
  });

  it('short-circuits: a middleware that does not call next() keeps the inner ones and the handler from running', async () => {
    const trace: string[] = [];
    const handler: StageHandler = { handle: () => void trace.push('handler') };
    const stop: ExecutionMiddleware = () => {
      trace.push('stop');
      return Promise.resolve('cached');
    };
    const wrapped = withExecutionMiddleware(handler, [around('a', trace), stop, around('c', trace)]);
    expect(await wrapped.handle(job(), ctx)).to.equal('cached');
    expect(trace).to.deep.equal(['a>', 'stop', '<a']);
  });

  it('lets a middleware transform the result', async () => {
    const handler: StageHandler = { handle: () => Promise.resolve({ pages: 3 }) };
    const annotate: ExecutionMiddleware = async (_job, _ctx, next) => ({ ...((await next()) as object), checked: true });
    expect(await withExecutionMiddleware(handler, [annotate]).handle(job(), ctx)).to.deep.equal({ pages: 3, checked: true });
  });

  it("propagates the handler's error (a synchronous throw too) out through every middleware, which may observe it", async () => {
    const seen: string[] = [];
    const observe: ExecutionMiddleware = async (_job, _ctx, next) => {
      try {
        return await next();
      } catch (err) {
        seen.push((err as Error).message);
        throw err;
      }
    };
    const handler: StageHandler = {
      handle: () => {
        throw new Error('smtp down');
      },
    };
    const err = await rejection(Promise.resolve(withExecutionMiddleware(handler, [observe, observe]).handle(job(), ctx)));
    expect((err as Error).message).to.equal('smtp down');
    expect(seen).to.deep.equal(['smtp down', 'smtp down']);
  });

  it('refuses a second next() from one middleware, so the handler never runs twice for a job', async () => {
    let runs = 0;
    const handler: StageHandler = { handle: () => void runs++ };
    const twice: ExecutionMiddleware = async function twice(_job, _ctx, next) {
      await next();
      return next();
    };
    const err = await rejection(Promise.resolve(withExecutionMiddleware(handler, [twice]).handle(job(), ctx)));
    expect(err).to.be.instanceOf(StagecoachError);
    expect((err as Error).message).to.contain('#1 (twice) called next() twice');
    expect(runs).to.equal(1);
  });
});

/** A publish step that records what reached it. */
function recorder(): { published: Array<{ job: Job; headers: Record<string, HeaderValue> | undefined }>; publish: PublishStep } {
  const published: Array<{ job: Job; headers: Record<string, HeaderValue> | undefined }> = [];
  return {
    published,
    publish: (sent, headers) => {
      published.push({ job: sent, headers });
      return Promise.resolve();
    },
  };
}

describe('enqueue middleware chain', () => {
  it('runs in registration order, each seeing the changes of those before, and publishes what the last passes on', async () => {
    const trace: string[] = [];
    const stamp =
      (name: string): EnqueueMiddleware =>
      async (outgoing, next) => {
        trace.push(`${name}:${String(outgoing.meta.seen ?? '')}`);
        outgoing.meta.seen = `${String(outgoing.meta.seen ?? '')}${name}`;
        outgoing.headers[`x-${name}`] = name;
        const id = await next();
        trace.push(`${name} published ${id === outgoing.id}`);
        return id;
      };
    const { published, publish } = recorder();
    const original = job();
    const id = await runEnqueueChain([stamp('a'), stamp('b')], original, { mime: 'text/plain' }, publish);
    expect(id).to.equal(original.id);
    expect(trace).to.deep.equal(['a:', 'b:a', 'b published true', 'a published true']);
    expect(published).to.have.length(1);
    expect(published[0]?.job.meta.seen).to.equal('ab');
    expect(published[0]?.headers).to.deep.equal({ mime: 'text/plain', 'x-a': 'a', 'x-b': 'b' });
    // The chain works on the job itself; its headers never reach the envelope's fields.
    expect(published[0]?.job).to.equal(original);
    expect(Object.keys(original)).to.not.include('headers');
    expect(JSON.parse(JSON.stringify(published[0]?.job))).to.not.have.property('headers');
  });

  it('publishes the job unchanged when there is no middleware', async () => {
    const { published, publish } = recorder();
    const original = job();
    await runEnqueueChain([], original, undefined, publish);
    expect(published[0]?.job).to.equal(original);
  });

  it("refuses with the middleware's own error: nothing after it runs, nothing is published", async () => {
    const later: string[] = [];
    const validate: EnqueueMiddleware = (outgoing) => Promise.reject(new TypeError(`args of ${outgoing.type} must be strings`));
    const { published, publish } = recorder();
    const err = await rejection(runEnqueueChain([validate, (_j, next) => (later.push('ran'), next())], job(), undefined, publish));
    expect(err).to.be.instanceOf(TypeError);
    expect((err as Error).message).to.equal('args of doc.scan must be strings');
    expect(later).to.deep.equal([]);
    expect(published).to.deep.equal([]);
  });

  it('refuses a job whose middleware returned without calling next(), naming the middleware', async () => {
    const { published, publish } = recorder();
    const err = await rejection(runEnqueueChain([async function dropAll() {}], job(), undefined, publish));
    expect(err).to.be.instanceOf(EnqueueRefusedError);
    expect((err as Error).message).to.match(
      /enqueue middleware #1 \(dropAll\) returned without calling next\(\): job .* \(doc\.scan\) for queue "documents" was not published/,
    );
    expect(published).to.deep.equal([]);
  });

  it('refuses changes to what decides where the job goes: id, queue, tenant, meta.batch', async () => {
    for (const change of [
      (o: Job) => (o.id = 'other'),
      (o: Job) => (o.queue = 'elsewhere'),
      (o: Job) => (o.tenant = 'globex'),
      (o: Job) => (o.meta.batch = 'b-1'),
    ]) {
      const { published, publish } = recorder();
      const err = await rejection(runEnqueueChain([(o, next) => (change(o), next())], job(), undefined, publish));
      expect(err).to.be.instanceOf(EnqueueRefusedError);
      expect((err as Error).message).to.contain('enqueue middleware changed');
      expect(published).to.deep.equal([]);
    }
  });

  it('publishes a replacement passed to next(), its headers taken out of the envelope', async () => {
    const { published, publish } = recorder();
    const original = job();
    const replace: EnqueueMiddleware = (outgoing, next) => next({ ...outgoing, args: ['replaced'], headers: { mime: 'x' } });
    await runEnqueueChain([replace], original, undefined, publish);
    expect(published[0]?.job.args).to.deep.equal(['replaced']);
    expect(published[0]?.job).to.not.have.property('headers');
    expect(published[0]?.headers).to.deep.equal({ mime: 'x' });
  });

  it("cannot hide the publish's failure by catching it", async () => {
    const swallow: EnqueueMiddleware = async (_o, next) => {
      try {
        return await next();
      } catch {
        return 'ignored';
      }
    };
    const err = await rejection(runEnqueueChain([swallow], job(), undefined, () => Promise.reject(new Error('broker refused'))));
    expect((err as Error).message).to.equal('broker refused');
  });
});

describe('@Stage middleware', () => {
  const first: ExecutionMiddleware = (_job, _ctx, next) => next();
  const stamp: EnqueueMiddleware = (_o, next) => next();

  it('is recorded apart from the metadata and read by the explorer', () => {
    @Stage({ name: 'mw-stage', input: 'in', middleware: { execution: [first], enqueue: [stamp] } })
    class WithMiddleware {
      handle(): void {}
    }
    const [found] = exploreStages({ WithMiddleware });
    expect(found?.metadata).to.deep.equal({ name: 'mw-stage', input: 'in', outputs: [] });
    expect(found?.middleware.execution).to.deep.equal([first]);
    expect(found?.middleware.enqueue).to.deep.equal([stamp]);
    expect(stageMiddlewareOf(class Plain {})).to.deep.equal({ enqueue: [], execution: [] });
  });

  it('refuses an entry that is not a function, naming the stage and the place', () => {
    expect(() => Stage({ name: 'bad', input: 'in', middleware: { execution: ['log' as unknown as ExecutionMiddleware] } })).to.throw(
      TypeError,
      '@Stage "bad": middleware.execution[0] must be a function, got string',
    );
  });
});

describe('StageGroup and Publisher middleware', () => {
  const notAFunction = 'log' as unknown as EnqueueMiddleware;

  it('is refused when an entry is not a function, before anything connects', async () => {
    const config = compileConfig({ broker: { url: 'amqp://nobody:nothing@127.0.0.1:1/' } });
    const err = await rejection(Publisher.connect(config, { middleware: { enqueue: [notAFunction] } }));
    expect(err).to.be.instanceOf(TypeError);
    expect((err as Error).message).to.equal('Publisher: middleware.enqueue[0] must be a function, got string');
    expect(() => new StageGroup(config, [], createLogger({}, 'error'), { middleware: { enqueue: [notAFunction] } })).to.throw(
      TypeError,
      'StageGroup: middleware.enqueue[0] must be a function, got string',
    );
  });
});

describe('StageHarness with middleware', () => {
  it("runs the group's middleware outside the stage's, for execution and for emits", async () => {
    const trace: string[] = [];
    const addHeader =
      (name: string): EnqueueMiddleware =>
      (outgoing, next) => {
        trace.push(`enqueue ${name}`);
        outgoing.headers['x-chain'] = `${String(outgoing.headers['x-chain'] ?? '')}${name}`;
        return next();
      };
    @Stage({
      name: 'harnessed',
      input: 'in',
      outputs: ['out'],
      middleware: { execution: [around('stage', trace)], enqueue: [addHeader('stage')] },
    })
    class Harnessed implements StageHandler {
      async handle(_job: Job, context: StageContext): Promise<void> {
        trace.push('handler');
        await context.emit('out', { type: 'next' });
      }
    }
    const harness = await StageHarness.create(Harnessed, {
      middleware: { execution: [around('group', trace)], enqueue: [addHeader('group')] },
    });
    const { emitted } = await harness.run({ type: 'x' });
    expect(trace).to.deep.equal(['group>', 'stage>', 'handler', 'enqueue group', 'enqueue stage', '<stage', '<group']);
    expect(emitted[0]?.headers['x-chain']).to.equal('groupstage');
  });
});
