import { getEventListeners } from 'node:events';
import { expect } from 'chai';
import type { TrackingRecord } from '../../src/tracking-stream/tracking-report.js';
import type { JobSink } from '../../src/broker/job-router.js';
import { DeliveryLostError, PublishError, StagecoachError, UnknownOutputError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { JobContext } from '../../src/stage/job-context.js';

const log = createLogger({ test: 'job-context' }, 'error');

/** A JobSink whose every send() returns a promise the test settles. */
class ControlledSink implements JobSink {
  readonly sent: Array<{ job: Job; confirm: () => void; refuse: (err: Error) => void }> = [];
  /** Tells each send's `sent` at once, as the broker's router does when its channel takes the job. */
  handOver = false;

  send(job: Job, _wire?: unknown, _scope?: unknown, _lost?: AbortSignal, sent?: () => void): Promise<void> {
    const confirm = new Promise<void>((resolve, reject) => this.sent.push({ job, confirm: resolve, refuse: reject }));
    if (this.handOver) sent?.();
    return confirm;
  }
}

/** Resolves with what `promise` settled to, or 'pending' if it has not settled by the next macrotask. */
async function state(promise: Promise<unknown>): Promise<unknown> {
  let result: unknown = 'pending';
  promise.then(
    (value) => (result = { value }),
    (err: unknown) => (result = { err }),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return result;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected a rejection'),
    (err: unknown) => err,
  );
}

function setup(): { ctx: JobContext; sink: ControlledSink; published: string[]; job: Job } {
  const sink = new ControlledSink();
  const published: string[] = [];
  const job = createJob({ type: 'doc.convert' }, { queue: 'incoming', tenant: 'acme' });
  const ctx = new JobContext('converter', ['converted', 'thumbnails'], job, {}, sink, log, undefined, (output) => published.push(output));
  return { ctx, sink, published, job };
}

describe('JobContext settlement', () => {
  it('settle() resolves with the number of emits, only once every one is confirmed', async () => {
    const { ctx, sink, published } = setup();
    const ids = [
      ctx.emit('converted', { type: 'doc.converted' }),
      ctx.emit('thumbnails', { type: 'doc.thumbs' }),
      ctx.emit('converted', { type: 'doc.converted' }),
    ];
    expect(sink.sent).to.have.length(3);
    expect(sink.sent.map((s) => s.job.queue)).to.deep.equal(['converted', 'thumbnails', 'converted']);
    const settled = ctx.settle();
    sink.sent[2].confirm();
    sink.sent[0].confirm();
    expect(await state(settled), 'one emit is not confirmed yet').to.equal('pending');
    sink.sent[1].confirm();
    expect(await settled).to.equal(3);
    expect(published).to.have.members(['converted', 'thumbnails', 'converted']);
    // Each emit resolved with its job's id.
    expect(await Promise.all(ids)).to.deep.equal(sink.sent.map((s) => s.job.id));
  });

  it('an emit resolves with its id once the job is handed to the channel, before its confirm; settle() waits for the confirm', async () => {
    const { ctx, sink } = setup();
    sink.handOver = true;
    const emitted = ctx.emit('converted', { type: 'doc.converted' });
    expect(await state(emitted), 'the job is on the channel: the handler goes on').to.deep.equal({ value: sink.sent[0].job.id });
    const settled = ctx.settle();
    expect(await state(settled), 'the input waits for the confirm').to.equal('pending');
    sink.sent[0].confirm();
    expect(await settled).to.equal(1);
  });

  it('a job refused by the broker after its hand-over fails settle() with the refusal, the emit having resolved', async () => {
    const { ctx, sink } = setup();
    sink.handOver = true;
    const id = await ctx.emit('converted', { type: 'doc.converted' });
    expect(id).to.equal(sink.sent[0].job.id);
    const settled = ctx.settle();
    const full = new PublishError('queue full', 'ojs.direct', 'converted', false);
    sink.sent[0].refuse(full);
    expect(await rejection(settled)).to.equal(full);
  });

  it('confirmed() waits for the confirms of every emit so far, and rejects with the first refusal', async () => {
    const { ctx, sink } = setup();
    sink.handOver = true;
    await ctx.emit('converted', { type: 'doc.converted' });
    await ctx.emit('thumbnails', { type: 'doc.thumbs' });
    const confirmed = ctx.confirmed();
    sink.sent[1].confirm();
    expect(await state(confirmed), 'the first emit is not confirmed yet').to.equal('pending');
    sink.sent[0].confirm();
    expect(await state(confirmed)).to.deep.equal({ value: undefined });
    await ctx.emit('converted', { type: 'doc.converted' });
    const refused = ctx.confirmed();
    const full = new PublishError('queue full', 'ojs.direct', 'converted', false);
    sink.sent[2].refuse(full);
    expect(await rejection(refused)).to.equal(full);
  });

  it('settle() with a single emit resolves 1 once it is confirmed, and with none resolves 0', async () => {
    const one = setup();
    void one.ctx.emit('converted', { type: 'doc.converted' });
    const settled = one.ctx.settle();
    expect(await state(settled)).to.equal('pending');
    one.sink.sent[0].confirm();
    expect(await settled).to.equal(1);
    const none = setup();
    expect(await none.ctx.settle()).to.equal(0);
  });

  it('an emit made while settle() awaits the confirms is refused with INVALID_REQUEST and never reaches the sink', async () => {
    const { ctx, sink, published } = setup();
    void ctx.emit('converted', { type: 'doc.converted' });
    void ctx.emit('converted', { type: 'doc.converted' });
    const settled = ctx.settle();
    // A handler's un-awaited callback fires late, while the confirms are awaited.
    const late = ctx.emit('thumbnails', { type: 'doc.thumbs' });
    const err = await rejection(late);
    expect(err).to.be.instanceOf(StagecoachError);
    expect((err as StagecoachError).code).to.equal('INVALID_REQUEST');
    expect(sink.sent, 'the late emit never reached the sink').to.have.length(2);
    sink.sent[0].confirm();
    sink.sent[1].confirm();
    expect(await settled, 'the refused emit is not counted').to.equal(2);
    expect(published).to.deep.equal(['converted', 'converted']);
  });

  it('an emit made while a single emit is awaited is refused too, and settle() still resolves 1', async () => {
    const { ctx, sink } = setup();
    void ctx.emit('converted', { type: 'doc.converted' });
    const settled = ctx.settle();
    const err = await rejection(ctx.emit('converted', { type: 'doc.converted' }));
    expect((err as StagecoachError).code).to.equal('INVALID_REQUEST');
    expect(sink.sent).to.have.length(1);
    sink.sent[0].confirm();
    expect(await settled).to.equal(1);
  });

  it('settle() throws the first failed emit error, but only after every emit has settled', async () => {
    const { ctx, sink, published } = setup();
    void ctx.emit('converted', { type: 'a' });
    void ctx.emit('converted', { type: 'b' });
    void ctx.emit('converted', { type: 'c' });
    const settled = ctx.settle();
    const lost = new PublishError('channel closed', 'ojs.root', 'converted', true);
    const full = new PublishError('queue full', 'ojs.root', 'converted', false);
    sink.sent[1].refuse(lost);
    expect(await state(settled), 'emit a is still unconfirmed').to.equal('pending');
    sink.sent[2].refuse(full);
    expect(await state(settled), 'emit a is still unconfirmed').to.equal('pending');
    sink.sent[0].confirm();
    expect(await rejection(settled)).to.equal(lost);
    expect(published, 'only the confirmed emit is counted as published').to.deep.equal(['converted']);
  });

  it('settle() throws the failure of the first emit in order, whichever failed first in time', async () => {
    const { ctx, sink } = setup();
    void ctx.emit('converted', { type: 'a' });
    void ctx.emit('converted', { type: 'b' });
    const settled = ctx.settle();
    const second = new Error('second');
    const first = new Error('first');
    sink.sent[1].refuse(second);
    sink.sent[0].refuse(first);
    expect(await rejection(settled)).to.equal(first);
  });

  it('settle() with a single failing emit throws its error', async () => {
    const { ctx, sink } = setup();
    void ctx.emit('converted', { type: 'a' });
    const settled = ctx.settle();
    const refused = new PublishError('queue full', 'ojs.root', 'converted', false);
    sink.sent[0].refuse(refused);
    expect(await rejection(settled)).to.equal(refused);
  });

  it('close() refuses every later emit with INVALID_REQUEST, and nothing reaches the sink', async () => {
    const { ctx, sink } = setup();
    ctx.close();
    const err = await rejection(ctx.emit('converted', { type: 'doc.converted' }));
    expect(err).to.be.instanceOf(StagecoachError);
    expect((err as StagecoachError).code).to.equal('INVALID_REQUEST');
    expect(sink.sent).to.have.length(0);
  });

  it('close() does not cancel the emits made before it: they still reach the sink', async () => {
    const { ctx, sink } = setup();
    const before = ctx.emit('converted', { type: 'doc.converted' });
    ctx.close();
    expect(sink.sent).to.have.length(1);
    sink.sent[0].confirm();
    expect(await before).to.equal(sink.sent[0].job.id);
  });

  it('an emit to an output the stage does not declare is UNKNOWN_OUTPUT and never reaches the sink', async () => {
    const { ctx, sink } = setup();
    const err = await rejection(ctx.emit('elsewhere', { type: 'doc.converted' }));
    expect(err).to.be.instanceOf(UnknownOutputError);
    expect((err as UnknownOutputError).code).to.equal('UNKNOWN_OUTPUT');
    expect(sink.sent).to.have.length(0);
    // The handler swallowed it and returned: the settlement still learns of it.
    expect(await rejection(ctx.settle())).to.equal(err);
  });

  it('an un-awaited failing emit does not cause an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const { ctx, sink } = setup();
      // Fire and forget, as a careless handler does: refused by the broker, an unknown output,
      // and an emit after close.
      void ctx.emit('converted', { type: 'a' });
      sink.sent[0].refuse(new PublishError('queue full', 'ojs.root', 'converted', false));
      void ctx.emit('elsewhere', { type: 'b' });
      ctx.close();
      void ctx.emit('converted', { type: 'c' });
      // Unhandled rejections are reported after the microtasks of a turn: give it a few turns.
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setTimeout(resolve, 0));
      expect(unhandled).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });

  it('emitted jobs carry the parent id and the tenant of the job being handled', () => {
    const { ctx, sink, job: parent } = setup();
    void ctx.emit('converted', { type: 'doc.converted', args: [1] });
    const [{ job }] = sink.sent;
    expect(job.tenant).to.equal('acme');
    expect(job.queue).to.equal('converted');
    expect(job.attempt).to.equal(1);
    expect(job.meta.parent_id).to.equal(parent.id);
  });
});

describe('JobContext: a handler starting a batch', () => {
  function batched(): { ctx: JobContext; sink: ControlledSink; tracked: TrackingRecord[]; release: () => void } {
    const sink = new ControlledSink();
    const tracked: TrackingRecord[] = [];
    let release!: () => void;
    const confirmed = new Promise<void>((resolve) => (release = resolve));
    const job = createJob({ type: 'scan' }, { queue: 'scans', tenant: 'acme', batch: 'parent' });
    const ctx = new JobContext('scanner', ['files'], job, {}, sink, log, undefined, undefined, (record) => {
      tracked.push(record);
      return confirmed;
    });
    return { ctx, sink, tracked, release };
  }

  it('reports the new root as created, confirmed, before sending it, and keeps it out of its own batch', async () => {
    const { ctx, sink, tracked, release } = batched();
    const started = ctx.emit('files', { type: 'file', batch: 'child-1' });
    const joined = ctx.emit('files', { type: 'file' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(tracked).to.have.length(1);
    expect(tracked[0]).to.deep.include({ kind: 'created', batch: 'child-1', tenant: 'acme', queue: 'files', type: 'file' });
    // Only the joining emit went out: the new root waits for its report's confirm.
    expect(sink.sent.map((s) => s.job.meta.batch)).to.deep.equal(['parent']);
    release();
    await new Promise((resolve) => setImmediate(resolve));
    expect(sink.sent.map((s) => s.job.meta.batch)).to.deep.equal(['parent', 'child-1']);
    for (const sent of sink.sent) sent.confirm();
    const [root, child] = await Promise.all([started, joined]);
    expect((tracked[0] as { job: string }).job).to.equal(root);
    expect(ctx.children).to.deep.equal([child]);
  });

  it('reports a root it could not send as discarded, and refuses a bad batch id or meta.batch naming another', async () => {
    const { ctx, sink, tracked, release } = batched();
    release();
    const started = ctx.emit('files', { type: 'file', batch: 'child-2' });
    await new Promise((resolve) => setImmediate(resolve));
    sink.sent[0].refuse(new PublishError('refused', 'x', 'y', false));
    await rejection(started);
    expect(tracked.map((r) => (r.kind === 'settled' ? r.outcome : r.kind))).to.deep.equal(['created', 'discarded']);
    expect(await rejection(ctx.emit('files', { type: 'file', batch: 'bad id' }))).to.be.instanceOf(StagecoachError);
    expect(((await rejection(ctx.emit('files', { type: 'file', meta: { batch: 'other' } }))) as Error).message).to.match(/give "batch"/);
  });
});

describe('JobContext when its delivery is lost', () => {
  const lostSetup = (): { ctx: JobContext; lost: AbortController; sink: ControlledSink } => {
    const sink = new ControlledSink();
    const lost = new AbortController();
    const job = createJob({ type: 'doc.convert' }, { queue: 'incoming', tenant: 'acme' });
    return { ctx: new JobContext('converter', ['converted'], job, {}, sink, log, lost.signal), lost, sink };
  };

  it('aborts ctx.signal with the loss, and refuses every emit after it with DELIVERY_LOST', async () => {
    const { ctx, lost, sink } = lostSetup();
    const signal = ctx.signal;
    expect(signal, 'a signal of its own, never the shared loss signal').not.to.equal(lost.signal);
    expect(signal.aborted).to.equal(false);
    lost.abort(new DeliveryLostError());
    expect(signal.aborted).to.equal(true);
    expect(signal.reason).to.be.instanceOf(DeliveryLostError);
    const err = await rejection(ctx.emit('converted', { type: 'doc.converted' }));
    expect(err).to.have.property('code', 'DELIVERY_LOST');
    expect(sink.sent, 'nothing handed to the sink').to.have.length(0);
  });

  it('hands the loss signal to the sink, so that a send still waiting can be dropped', () => {
    const sent: Array<AbortSignal | undefined> = [];
    const lost = new AbortController();
    const job = createJob({ type: 'doc.convert' }, { queue: 'incoming', tenant: 'acme' });
    const sink: JobSink = { send: (_job, _wire, _scope, signal) => (sent.push(signal), new Promise<void>(() => undefined)) };
    const ctx = new JobContext('converter', ['converted'], job, {}, sink, log, lost.signal);
    void ctx.emit('converted', { type: 'doc.converted' });
    expect(sent).to.deep.equal([lost.signal]);
  });

  it('leaves no listener on the loss signal once closed, and makes none for a handler that never reads ctx.signal', () => {
    const { ctx, lost } = lostSetup();
    expect(getEventListeners(lost.signal, 'abort')).to.have.length(0);
    void ctx.signal;
    expect(getEventListeners(lost.signal, 'abort')).to.have.length(1);
    ctx.close();
    expect(getEventListeners(lost.signal, 'abort')).to.have.length(0);
  });
});
