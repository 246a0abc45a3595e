import { expect } from 'chai';
import { callbackJobId, callbackMeta, callbacksToRun, checkCallbacks, checkCallbackSpec } from '../../src/batch/batch-callbacks.js';
import { BatchFold } from '../../src/batch/batch-fold.js';
import { withTrustedCallbacks } from '../../src/batch/batch-callbacks.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CreatedReport } from '../../src/tracking-stream/tracking-report.js';
import { StagecoachError } from '../../src/errors/errors.js';
import type { BatchCallbacks } from '../../src/job/job.types.js';
import { uuidv5 } from '../../src/job/uuid-v5.js';

const spec = (type: string) => ({ queue: 'notes', type, args: [] });
const all: BatchCallbacks = { on_complete: spec('done'), on_success: spec('ok'), on_failure: spec('bad') };
const names = (callbacks: BatchCallbacks | undefined, cancelled: boolean, failed: number) =>
  callbacksToRun(callbacks, { cancelled, failed }).map(({ name, spec: s }) => `${name}:${s.type}`);

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).to.be.instanceOf(StagecoachError);
    expect((err as StagecoachError).code).to.equal('INVALID_REQUEST');
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('batch callbacks', () => {
  describe('which callbacks a batch that ended runs', () => {
    it('runs on_complete and on_success when no job failed', () => {
      expect(names(all, false, 0)).to.deep.equal(['on_complete:done', 'on_success:ok']);
    });

    it('runs on_complete and on_failure when a job failed', () => {
      expect(names(all, false, 2)).to.deep.equal(['on_complete:done', 'on_failure:bad']);
    });

    it('runs on_complete only for a cancelled batch, failed jobs or not', () => {
      expect(names(all, true, 0)).to.deep.equal(['on_complete:done']);
      expect(names(all, true, 3)).to.deep.equal(['on_complete:done']);
      expect(names({ on_success: spec('ok'), on_failure: spec('bad') }, true, 1)).to.deep.equal([]);
    });

    it('runs only what was declared', () => {
      expect(names(undefined, false, 0)).to.deep.equal([]);
      expect(names({ on_failure: spec('bad') }, false, 0)).to.deep.equal([]);
      expect(names({ on_success: spec('ok') }, false, 0)).to.deep.equal(['on_success:ok']);
    });
  });

  describe('callback job ids', () => {
    it('are RFC 9562 UUIDv5 (the RFC example)', () => {
      // RFC 9562 appendix A.4: "www.example.com" in the DNS namespace.
      expect(uuidv5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).to.equal('2ed6657d-e927-568b-95e1-2665a8aea6a2');
    });

    it('are the same for the same batch and callback, and differ otherwise', () => {
      const id = callbackJobId('acme-scan-1', 'on_success');
      expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(callbackJobId('acme-scan-1', 'on_success')).to.equal(id);
      expect(callbackJobId('acme-scan-1', 'on_failure')).to.not.equal(id);
      expect(callbackJobId('acme-scan-2', 'on_success')).to.not.equal(id);
    });
  });

  describe('declarations', () => {
    it('takes a full spec and defaults args to []', () => {
      expect(checkCallbacks({ on_complete: { queue: 'q', type: 't' } }, 'callbacks')).to.deep.equal({
        on_complete: { queue: 'q', type: 't', args: [] },
      });
      const full = { queue: 'q', type: 't', args: [1, 'x'], tenant: 'acme', meta: { k: 1 }, headers: { mime: 'text/plain' } };
      expect(checkCallbackSpec(full, '--on-success')).to.deep.equal(full);
    });

    it('refuses what could not be published, naming the callback and the field', () => {
      expect(refusal(() => checkCallbacks({ on_done: spec('x') }, 'callbacks'))).to.match(/callbacks: unknown callback "on_done"/);
      expect(refusal(() => checkCallbacks([], 'callbacks'))).to.match(/callbacks must be an object/);
      expect(refusal(() => checkCallbacks({ on_success: { type: 't' } }, 'callbacks'))).to.match(/callbacks.on_success: "queue"/);
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: '' }, '--on-failure'))).to.match(/^--on-failure: "type"/);
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: 't', args: 'x' }, 'cb'))).to.match(/"args" must be a JSON array/);
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: 't', arg: [] }, 'cb'))).to.match(/unknown field "arg"/);
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: 't', tenant: 'Acme' }, 'cb'))).to.match(/"tenant"/);
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: 't', meta: [] }, 'cb'))).to.match(/"meta" must be an object/);
      expect(refusal(() => checkCallbackSpec('q', 'cb'))).to.match(/must be a job spec object/);
    });

    it('refuses a callback job in a batch, by meta or by header', () => {
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: 't', meta: { batch: 'b' } }, 'cb'))).to.match(
        /"meta.batch" is not allowed/,
      );
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: 't', headers: { 'x-ojs-batch': 'b' } }, 'cb'))).to.match(/reserved/);
      expect(refusal(() => checkCallbackSpec({ queue: 'q', type: 't', headers: { h: {} } }, 'cb'))).to.match(/header "h"/);
    });
  });

  it('meta names the batch, the callback, the end and the counts', () => {
    const counts = { known: 3, completed: 2, failed: 1, dead: 1, discarded: 0, cancelled: 0, in_flight: 0 };
    expect(callbackMeta({ id: 'b1', tenant: 'acme' }, 'on_failure', { cancelled: false, failed: 1 }, counts)).to.deep.equal({
      batch: 'b1',
      callback: 'on_failure',
      state: 'completed',
      tenant: 'acme',
      failed: true,
      jobs: counts,
    });
  });

  it('with tenant users, takes callbacks only from a record its user could write for the batch tenant', () => {
    const config = compileConfig({ prefix: 'p', broker: { url: 'amqp://p.internal:pw@localhost:5672/' }, security: { tenantUsers: true } });
    const record: CreatedReport = { kind: 'created', id: 'c', job: 'j', batch: 'b', tenant: 'acme', queue: 'q', at: '', callbacks: all };
    expect(withTrustedCallbacks(config, record, 'p.producer.acme')).to.equal(record);
    expect(withTrustedCallbacks(config, record, 'p.stage.acme')).to.equal(record);
    const stripped = withTrustedCallbacks(config, record, 'p.producer.globex');
    const { callbacks, ...rest } = record;
    expect(callbacks).to.deep.equal(all);
    expect(stripped).to.deep.equal(rest);
    expect(withTrustedCallbacks(config, record, undefined)).to.not.have.property('callbacks');
    // Without tenant users, the broker's users are all trusted alike.
    const open = compileConfig({ prefix: 'p' });
    expect(withTrustedCallbacks(open, record, undefined)).to.equal(record);
  });

  describe('in the fold', () => {
    const created = (job: string, callbacks?: BatchCallbacks, tenant = 'acme'): CreatedReport => ({
      kind: 'created',
      id: `c-${job}`,
      job,
      batch: 'b1',
      tenant,
      queue: 'scans',
      at: '2026-01-01T00:00:00.000Z',
      ...(callbacks === undefined ? {} : { callbacks }),
    });

    it('learns them from the created reports, the first declaration of each name standing', () => {
      const fold = new BatchFold();
      fold.apply(created('r1', { on_success: spec('first') }));
      fold.apply(created('r2'));
      fold.apply(created('r3', { on_success: spec('second'), on_failure: spec('bad') }));
      expect(fold.batch('b1')?.callbacks).to.deep.equal({ on_success: spec('first'), on_failure: spec('bad') });
    });

    it('ignores the callbacks of a report refused for naming another tenant', () => {
      const fold = new BatchFold();
      fold.apply(created('r1'));
      fold.apply(created('r2', { on_complete: spec('intruder') }, 'globex'));
      expect(fold.batch('b1')?.callbacks).to.equal(undefined);
    });
  });
});
