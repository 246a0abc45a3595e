import { expect } from 'chai';
import { ApiError } from '../../src/http-api/api-error.js';
import {
  InvalidPayloadError,
  JobCancelledError,
  NonRetryableError,
  StagecoachError,
  VisibilityExpiredError,
} from '../../src/errors/errors.js';
import { toBindingError } from '../../src/http-api/http-binding/binding-error.js';
import { bindingJobView } from '../../src/http-api/http-binding/binding-job-view.js';
import { ClaimBoard } from '../../src/http-api/http-binding/claim-board.js';
import { EnvelopeCache } from '../../src/http-api/http-binding/envelope-cache.js';
import { isBindingRequest } from '../../src/http-api/http-binding/ojs-media.js';
import { readPushInput } from '../../src/http-api/http-binding/push-input.js';
import type { JobRow } from '../../src/job-state/job-lifecycle.js';
import type { Job } from '../../src/job/job.types.js';
import { createJob } from '../../src/job/envelope.js';
import { QueueFullError } from '../../src/errors/errors.js';
import { unsupportedEndpoint } from '../../src/http-api/http-binding/unsupported-endpoints.js';
import type { StageContext } from '../../src/stage/stage.types.js';

const job = (id: string, extra: Partial<Job> = {}): Job => ({
  specversion: '1.0',
  id,
  type: 't.x',
  queue: 'q',
  args: [],
  meta: {},
  attempt: 1,
  created_at: '2026-01-01T00:00:00.000Z',
  ...extra,
});

function context(): StageContext & { emitted: Array<[string, unknown]>; abort: AbortController } {
  const abort = new AbortController();
  const emitted: Array<[string, unknown]> = [];
  return {
    signal: abort.signal,
    abort,
    emitted,
    emit: (output: string, spec: unknown) => {
      emitted.push([output, spec]);
      return Promise.resolve('child');
    },
  } as unknown as StageContext & { emitted: Array<[string, unknown]>; abort: AbortController };
}

describe('OJS HTTP binding', () => {
  describe('readPushInput', () => {
    it('reads a push into the publisher spec, keeping the OJS priority and unknown fields', () => {
      const input = readPushInput(
        {
          type: 'email.send',
          args: [1],
          meta: { a: 1 },
          options: { queue: 'mail', priority: -50, timeout_ms: 1500, delay_until: '2030-01-01T00:00:00Z' },
          x_ext: true,
        },
        'acme',
      );
      expect(input.queue).to.equal('mail');
      expect(input.priority).to.equal(-50);
      expect(input.extensions).to.deep.equal({ x_ext: true });
      expect(input.spec).to.include({ type: 'email.send', timeout: 2, scheduled_at: '2030-01-01T00:00:00Z', tenant: 'acme' });
    });

    it('refuses what the spec refuses, naming the field', () => {
      const refusals: Array<[unknown, RegExp]> = [
        [null, /JSON object/],
        [{ args: [] }, /"type"/],
        [{ type: 'Email.Send', args: [] }, /"type"/],
        [{ type: 'a.b' }, /"args"/],
        [{ type: 'a.b', args: {} }, /"args"/],
        [{ type: 'a.b', args: [], id: '550e8400-e29b-41d4-a716-446655440000' }, /UUIDv7/],
        [{ type: 'a.b', args: [], options: { queue: 'Default' } }, /options.queue/],
        [{ type: 'a.b', args: [], options: { priority: 101 } }, /priority/],
      ];
      for (const [body, message] of refusals)
        expect(() => readPushInput(body, undefined), JSON.stringify(body)).to.throw(InvalidPayloadError, message);
    });

    it('reads specversion "1.0" and "1.0.0-rc.1", and refuses any other', () => {
      for (const specversion of ['1.0', '1.0.0-rc.1'])
        expect(readPushInput({ type: 'a.b', args: [], specversion }, undefined).spec.type).to.equal('a.b');
      expect(() => readPushInput({ type: 'a.b', args: [], specversion: '2.0' }, undefined)).to.throw(InvalidPayloadError, /"specversion"/);
    });

    it('keeps options.tags on the job spec, and refuses tags that are not a list of short strings', () => {
      expect(readPushInput({ type: 'a.b', args: [], options: { tags: ['onboarding', 'vip'] } }, undefined).spec.tags).to.deep.equal([
        'onboarding',
        'vip',
      ]);
      for (const tags of ['vip', [1], [''], Array.from({ length: 33 }, (_, i) => `t${i}`)]) {
        expect(() => readPushInput({ type: 'a.b', args: [], options: { tags } }, undefined), JSON.stringify(tags)).to.throw(
          InvalidPayloadError,
          /"options.tags"/,
        );
      }
    });

    it("reads meta.tenant_id as the tenant, writes the request's tenant into it, and refuses the two disagreeing (ojs-multi-tenancy 5.1, 5.3)", () => {
      const fromMeta = readPushInput({ type: 'a.b', args: [], meta: { tenant_id: 'acme' } }, undefined);
      expect(fromMeta.spec.tenant).to.equal('acme');
      const fromHeader = readPushInput({ type: 'a.b', args: [], meta: { k: 1 } }, 'acme');
      expect(fromHeader.spec).to.include({ tenant: 'acme' });
      expect(fromHeader.spec.meta).to.deep.equal({ k: 1, tenant_id: 'acme' });
      expect(readPushInput({ type: 'a.b', args: [], meta: { tenant_id: 'acme' } }, 'acme').spec.tenant).to.equal('acme');
      expect(() => readPushInput({ type: 'a.b', args: [], meta: { tenant_id: 'globex' } }, 'acme'))
        .to.throw(StagecoachError, /"meta.tenant_id" is "globex" but the request acts for tenant "acme"/)
        .with.property('code', 'INVALID_REQUEST');
      expect(() => readPushInput({ type: 'a.b', args: [], meta: { tenant_id: 'Acme Corp' } }, undefined)).to.throw(
        InvalidPayloadError,
        /"meta.tenant_id"/,
      );
    });

    it('derives the id of a push naming its parent and an idempotency key: the same pair, the same id', () => {
      const parent = '019414d4-8b2e-7c3a-b5d1-f0e2a3b4c5d6';
      const body = (key: string, tenant?: string): unknown => ({
        type: 'a.b',
        args: [],
        meta: { parent_id: parent, idempotency_key: key, ...(tenant === undefined ? {} : { tenant_id: tenant }) },
      });
      const first = readPushInput(body('thumb'), undefined);
      expect(first.derived).to.equal(true);
      expect(first.id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      // The parent's time: listed beside it.
      expect(first.id?.replace(/-/g, '').slice(0, 12)).to.equal(parent.replace(/-/g, '').slice(0, 12));
      expect(readPushInput(body('thumb'), undefined).id).to.equal(first.id);
      expect(readPushInput(body('text'), undefined).id).to.not.equal(first.id);
      expect(readPushInput(body('thumb', 'acme'), undefined).id).to.not.equal(first.id);
      expect(() => readPushInput({ type: 'a.b', args: [], meta: { idempotency_key: 'k' } }, undefined)).to.throw(
        InvalidPayloadError,
        /"meta.parent_id"/,
      );
      expect(() =>
        readPushInput({ type: 'a.b', args: [], id: first.id, meta: { parent_id: parent, idempotency_key: 'k' } }, undefined),
      ).to.throw(InvalidPayloadError, /one or the other/);
    });

    it('reads a relative time as "+" and a duration, or a bare duration as the JS SDK passes its delay on', () => {
      for (const given of ['+PT5M', 'PT5M']) {
        const at = Date.parse(readPushInput({ type: 'a.b', args: [], options: { delay_until: given } }, undefined).spec.scheduled_at ?? '');
        expect(at, given).to.be.closeTo(Date.now() + 300_000, 5000);
      }
      expect(() => readPushInput({ type: 'a.b', args: [], options: { delay_until: 'P5X' } }, undefined)).to.throw(InvalidPayloadError);
    });

    it('takes hyphenated job types and the default queue', () => {
      expect(readPushInput({ type: 'retry.test.max-attempts', args: [] }, undefined).queue).to.equal('default');
    });
  });

  describe('bindingJobView', () => {
    const row = (over: Partial<JobRow>): JobRow => ({
      id: 'j',
      state: 'available',
      key: [1, '2026-01-01T00:00:01.000Z', 0],
      outcome: 'created',
      attempt: 1,
      children: [],
      errors: [],
      ...over,
    });

    it('shows the timeout in seconds and in milliseconds, and the tags', () => {
      const job = { ...createJob({ type: 't', timeout: 30, tags: ['vip'] }, { queue: 'q' }) };
      const view = bindingJobView(undefined, { job, extensions: {} });
      expect(view).to.include({ timeout: 30, timeout_ms: 30_000 });
      expect(view.tags).to.deep.equal(['vip']);
      expect(bindingJobView(row({ tags: ['stored'] }), undefined).tags).to.deep.equal(['stored']);
      expect(bindingJobView(row({}), undefined)).to.not.have.any.keys('timeout', 'timeout_ms', 'tags');
    });

    it('counts attempts made: 0 while the first waits, the attempt at hand once started, the last made while a retry waits', () => {
      expect(bindingJobView(row({}), undefined).attempt).to.equal(0);
      expect(bindingJobView(row({ state: 'active', outcome: 'started', started_at: 'x' }), undefined).attempt).to.equal(1);
      expect(bindingJobView(row({ state: 'retryable', outcome: 'retrying', attempt: 2, started_at: 'x' }), undefined).attempt).to.equal(1);
    });

    it('leaves out what has no value, and dates a discarded job', () => {
      const waiting = bindingJobView(row({}), { job: job('j', { args: [1] }), extensions: { x: 1 }, priority: 7 });
      expect(waiting).to.include({ state: 'available', priority: 7, x: 1 });
      expect(waiting).not.to.have.property('started_at');
      const dead = bindingJobView(
        row({ state: 'discarded', outcome: 'dead', key: [1, '2026-01-02T00:00:00.000Z', 2], started_at: 'x' }),
        undefined,
      );
      expect(dead).to.include({ completed_at: '2026-01-02T00:00:00.000Z', discarded_at: '2026-01-02T00:00:00.000Z' });
    });
  });

  describe('ClaimBoard', () => {
    it('claims from the lines in the order asked, each job once', async () => {
      const board = new ClaimBoard();
      const started: string[] = [];
      const settled = [
        board.hold('low', job('l1'), context(), (j) => started.push(j.id)),
        board.hold('high', job('h1'), context(), (j) => started.push(j.id)),
      ];
      const taken = board.claim(['high', 'low'], 5, 'w', () => 60_000);
      expect(taken.map((held) => held.job.id)).to.deep.equal(['h1', 'l1']);
      expect(started).to.deep.equal(['h1', 'l1']);
      expect(board.claim(['high', 'low'], 5, 'w', () => 60_000)).to.deep.equal([]);
      for (const held of taken) await board.ack(held, {});
      await Promise.all(settled);
    });

    it('an ack emits before it returns the result; a nack fails the handler, non-retryable when the worker says so', async () => {
      const board = new ClaimBoard();
      const ctx = context();
      const acked = board.hold('q', job('a'), ctx, () => undefined);
      const nacked = board.hold('q', job('b'), context(), () => undefined);
      const [a, b] = board.claim(['q'], 2, 'w', () => 60_000);
      await board.ack(a, { result: { ok: true }, emit: [{ queue: 'out', type: 'x.y', args: [1] }] });
      expect(await acked).to.deep.equal({ ok: true });
      expect(ctx.emitted).to.deep.equal([['out', { type: 'x.y', args: [1] }]]);
      board.nack(b, { type: 'BadInput', message: 'no', retryable: false });
      const error = await nacked.catch((err: unknown) => err);
      expect(error).to.be.instanceOf(NonRetryableError);
      expect((error as NonRetryableError).type).to.equal('BadInput');
      expect(board.claimOf('b')).to.equal(undefined);
    });

    it('a claim not extended by heartbeats expires into a hand-back; cancel settles a waiting job cancelled', async () => {
      const board = new ClaimBoard();
      const expiring = board.hold('q', job('e'), context(), () => undefined);
      board.claim(['q'], 1, 'w', () => 30);
      expect(board.heartbeat('other', undefined)).to.deep.equal([]);
      expect(await expiring.catch((err: unknown) => err)).to.be.instanceOf(VisibilityExpiredError);
      const waiting = board.hold('q', job('c'), context(), () => undefined);
      expect(board.cancel('c')?.job.id).to.equal('c');
      expect(await waiting.catch((err: unknown) => err)).to.be.instanceOf(JobCancelledError);
      expect(board.waitingOn('q')).to.equal(0);
    });

    it('hands out the highest OJS priority it holds first, first come first served within one', async () => {
      const board = new ClaimBoard();
      const held = [
        board.hold('q', job('low', { priority: -10 }), context(), () => undefined),
        board.hold('q', job('none'), context(), () => undefined),
        board.hold('q', job('normal', { priority: 0 }), context(), () => undefined),
        board.hold('q', job('high', { priority: 10 }), context(), () => undefined),
        board.hold('q', job('higher', { priority: 11 }), context(), () => undefined),
        board.hold('q', job('low2', { priority: -10 }), context(), () => undefined),
      ];
      const first = board.claim(['q'], 1, 'w', () => 60_000);
      const rest = board.claim(['q'], 10, 'w', () => 60_000);
      expect([...first, ...rest].map((h) => h.job.id)).to.deep.equal(['higher', 'high', 'none', 'normal', 'low', 'low2']);
      for (const h of [...first, ...rest]) await board.ack(h, {});
      await Promise.all(held);
    });

    it('a job whose delivery was lost leaves the board', async () => {
      const board = new ClaimBoard();
      const ctx = context();
      const lost = board.hold('q', job('z'), ctx, () => undefined);
      ctx.abort.abort(new Error('lost'));
      await lost.catch(() => undefined);
      expect(board.claim(['q'], 1, 'w', () => 1000)).to.deep.equal([]);
    });
  });

  it('errors carry the binding code, a hint and a docs URL', () => {
    const { status, body } = toBindingError(new ApiError(404, 'NOT_FOUND', 'nope'));
    expect(status).to.equal(404);
    expect(body.error).to.include({ code: 'not_found', retryable: false });
    expect(body.error.hint).to.be.a('string');
    expect(toBindingError(new StagecoachError('DUPLICATE', 'twice')).body.error.code).to.equal('duplicate');
  });

  it('a full queue is 429 QUEUE_FULL, retryable, with Retry-After; a job type the queue refuses a 422 (ojs-backpressure 7.1, ojs-errors)', () => {
    const full = toBindingError(new QueueFullError('ojs.direct', 'work', { queue: 'work' }));
    expect(full.status).to.equal(429);
    expect(full.body.error).to.include({ code: 'QUEUE_FULL', retryable: true });
    expect(full.headers).to.deep.equal({ 'Retry-After': '1' });
    const refused = toBindingError(new StagecoachError('JOB_TYPE_NOT_ALLOWED', 'no'));
    expect(refused.status).to.equal(422);
    expect(refused.body.error).to.include({ code: 'job_type_not_allowed', retryable: false });
  });

  it('an OJS endpoint this server does not serve is 422 unsupported; any other path none of its business', () => {
    for (const path of ['/ojs/v1/schemas', '/ojs/v1/schemas/urn:x', '/ojs/v1/workers/progress']) {
      const err = unsupportedEndpoint('GET', path);
      expect(err, path).to.be.instanceOf(ApiError).with.property('status', 422);
      expect(toBindingError(err).body.error.code, path).to.equal('unsupported');
    }
    expect(unsupportedEndpoint('GET', '/ojs/v1/nothing')).to.equal(undefined);
  });

  it("the binding's paths are answered in its media type whatever Accept says, the admin API's in JSON", () => {
    expect(isBindingRequest('/ojs/v1/jobs/x')).to.equal(true);
    expect(isBindingRequest('/ojs/v1/jobs')).to.equal(true);
    expect(isBindingRequest('/ojs/v1/queues')).to.equal(false);
  });

  it('the envelope cache keeps the newest', () => {
    const cache = new EnvelopeCache(2);
    for (const id of ['a', 'b', 'c']) cache.add({ job: job(id), extensions: {} });
    expect([cache.has('a'), cache.has('b'), cache.has('c')]).to.deep.equal([false, true, true]);
  });
});
