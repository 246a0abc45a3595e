import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { DuplicateJobError, StagecoachError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import type { Job, UniquePolicy } from '../../src/job/job.types.js';
import { canonicalJson, compileUnique, DEFAULT_UNIQUE_STATES } from '../../src/job/unique-policy.js';
import { MemoryJobStore } from '../../src/job-state/memory-job-store.js';
import { UniqueGate } from '../../src/job-state/unique/unique-gate.js';
import { runEnqueueChain } from '../../src/stage/middleware/enqueue-chain.js';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

function job(unique: UniquePolicy, over: Partial<Job> = {}): Job {
  return { ...createJob({ type: 'email.send', args: [{ user_id: 42, template: 'welcome' }] }, { queue: 'mail' }), unique, ...over };
}

describe('unique jobs: policy and key (OJS unique jobs 2-4)', () => {
  it('canonical JSON sorts keys at every level, drops whitespace and normalises strings to NFC', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, 'x'], c: null } })).to.equal('{"a":{"c":null,"d":[1,"x"]},"b":1}');
    // "é" as e + combining acute, and precomposed: one key.
    expect(canonicalJson({ 'cafe\u0301': 'e\u0301' })).to.equal(canonicalJson({ café: '\u00e9' }));
    expect(canonicalJson({ n: 1e21, f: 0.1, neg: -0 })).to.equal('{"f":0.1,"n":1e+21,"neg":0}');
  });

  it('computes the spec example: SHA-256 of {"args":{...},"queue":...,"type":...}, lowercase hex', () => {
    const compiled = compileUnique(job({ keys: ['type', 'queue', 'args'], args_keys: ['user_id'] }, { queue: 'notifications' }));
    expect(compiled.key).to.equal(sha256('{"args":{"user_id":42},"queue":"notifications","type":"email.send"}'));
    expect(compiled.key).to.match(/^[0-9a-f]{64}$/);
  });

  it('always includes the type, and the tenant, whatever `keys` says', () => {
    const bare = compileUnique(job({ keys: ['queue'] }));
    expect(bare.key).to.equal(sha256('{"queue":"mail","type":"email.send"}'));
    const acme = compileUnique(job({}, { tenant: 'acme' }));
    const globex = compileUnique(job({}, { tenant: 'globex' }));
    expect(acme.key).to.equal(sha256('{"tenant":"acme","type":"email.send"}'));
    expect(acme.key).to.not.equal(globex.key);
  });

  it('args_keys: jobs differing only outside the selected keys share a key; all of args by default', () => {
    const a = job({ keys: ['args'], args_keys: ['user_id'] });
    const b = job({ keys: ['args'], args_keys: ['user_id'] }, { args: [{ user_id: 42, template: 'other' }] });
    expect(compileUnique(a).key).to.equal(compileUnique(b).key);
    expect(compileUnique(job({ keys: ['args'] })).key).to.not.equal(compileUnique({ ...b, unique: { keys: ['args'] } }).key);
    // Key order in the arguments does not matter.
    const reordered = job({ keys: ['args'] }, { args: [{ template: 'welcome', user_id: 42 }] });
    expect(compileUnique(reordered).key).to.equal(compileUnique(job({ keys: ['args'] })).key);
  });

  it('meta counts only through meta_keys', () => {
    const one = job({ keys: ['meta'], meta_keys: ['region'] }, { meta: { region: 'eu', trace: '1' } });
    const two = job({ keys: ['meta'], meta_keys: ['region'] }, { meta: { region: 'eu', trace: '2' } });
    const three = job({ keys: ['meta'], meta_keys: ['region'] }, { meta: { region: 'us', trace: '1' } });
    expect(compileUnique(one).key).to.equal(compileUnique(two).key);
    expect(compileUnique(one).key).to.not.equal(compileUnique(three).key);
  });

  it('reads "key" as ojs-core and the SDKs write it: dimension names as "keys", other names as "args_keys"', () => {
    // The Python SDK: dimensions.
    expect(compileUnique(job({ key: ['type', 'queue', 'args'] })).key).to.equal(
      compileUnique(job({ keys: ['type', 'queue', 'args'] })).key,
    );
    // ojs-core's example and the JS SDK: keys of the first argument.
    expect(compileUnique(job({ key: ['user_id'] })).key).to.equal(
      compileUnique(job({ keys: ['type', 'args'], args_keys: ['user_id'] })).key,
    );
    expect(compileUnique(job({ key: ['queue', 'user_id'] })).key).to.equal(
      compileUnique(job({ keys: ['type', 'queue', 'args'], args_keys: ['user_id'] })).key,
    );
    // The same key for two jobs whose named argument agrees, another when it differs.
    const other = job({ key: ['user_id'] }, { args: [{ user_id: 42, template: 'reminder' }] });
    expect(compileUnique(other).key).to.equal(compileUnique(job({ key: ['user_id'] })).key);
    expect(compileUnique(job({ key: ['user_id'] }, { args: [{ user_id: 7 }] })).key).to.not.equal(compileUnique(other).key);
  });

  it('defaults: states not ended, on_conflict reject, no period; period parsed to milliseconds', () => {
    const compiled = compileUnique(job({}));
    expect(compiled.states).to.deep.equal(DEFAULT_UNIQUE_STATES);
    expect(compiled.onConflict).to.equal('reject');
    expect(compiled.periodMs).to.equal(undefined);
    expect(compileUnique(job({ period: 'PT1H' })).periodMs).to.equal(3_600_000);
  });

  for (const [name, policy, message] of [
    ['an unknown dimension (case-sensitive)', { keys: ['Args'] }, '"keys": "Args"'],
    ['meta without meta_keys', { keys: ['meta'] }, 'needs "meta_keys"'],
    ['args_keys naming a key the arguments lack', { keys: ['args'], args_keys: ['order_id'] }, '"args_keys": "order_id"'],
    ['an unknown state', { states: ['done'] }, '"states": "done"'],
    ['an unknown on_conflict', { on_conflict: 'skip' }, '"on_conflict"'],
    ['a period that is not a duration', { period: '3600' }, '"period"'],
    ['an unknown field', { keyz: ['type'] }, 'unknown field "keyz"'],
    ['"key" beside "keys"', { key: ['type'], keys: ['type'] }, 'the alias of "keys"'],
    ['"key" that is not a list', { key: 'x' }, '"key" must be a list of strings'],
  ] as const) {
    it(`refuses ${name} with INVALID_REQUEST, at createJob already`, () => {
      expect(() => compileUnique(job(policy as unknown as UniquePolicy)))
        .to.throw(StagecoachError, message)
        .with.property('code', 'INVALID_REQUEST');
      expect(() =>
        createJob({ type: 'email.send', args: [{ user_id: 42 }], unique: policy as unknown as UniquePolicy }, { queue: 'mail' }),
      ).to.throw(StagecoachError, message);
    });
  }

  it('a job carrying unique with the memory store is refused, saying the PostgreSQL store is needed, and nothing is published', async () => {
    const gate = new UniqueGate({ kind: 'memory' });
    let published = 0;
    const host = { tracked: () => true, cancel: () => Promise.resolve() };
    const err = await gate
      .admit(job({}), host, () => {
        published++;
        return Promise.resolve();
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).to.be.instanceOf(StagecoachError).with.property('code', 'INVALID_REQUEST');
    expect((err as Error).message).to.contain('needs the PostgreSQL job store');
    expect(published).to.equal(0);
  });

  it('with the memory store, a process that folds job states holds keys in its store: a duplicate is refused until its holder completes, and clear() forgets every key', async () => {
    const gate = new UniqueGate({ kind: 'memory' });
    const store = new MemoryJobStore(() => 86_400_000);
    const undo = gate.foldsHere(() => Promise.resolve(store));
    const host = { tracked: () => true, cancel: () => Promise.resolve() };
    const admit = (j: Job) => gate.admit(j, host, () => Promise.resolve());
    try {
      const first = job({});
      expect(await admit(first)).to.equal(undefined);
      store.applyNow([{ kind: 'created', id: 'c1', job: first.id, queue: first.queue, type: first.type, at: new Date().toISOString() }]);
      const refused = await admit(job({})).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refused).to.be.instanceOf(DuplicateJobError).with.nested.property('details.existing_job_id', first.id);
      // ignore answers the holder's id
      expect(await admit(job({ on_conflict: 'ignore' }))).to.equal(first.id);
      // completed is not among the default states: the key is free again
      const settled = {
        id: 's1',
        job: first.id,
        queue: first.queue,
        stage: 'mailer',
        type: first.type,
        attempt: 1,
        at: new Date().toISOString(),
      };
      store.applyNow([{ kind: 'settled', ...settled, outcome: 'completed' }]);
      const second = job({});
      expect(await admit(second)).to.equal(undefined);
      await store.clear();
      expect(await admit(job({})), 'a key after clear()').to.equal(undefined);
    } finally {
      undo();
    }
    const after = await admit(job({})).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(after, 'once the process no longer folds').to.be.instanceOf(StagecoachError).with.property('code', 'INVALID_REQUEST');
  });

  it('the enqueue chain answers the id its publish step answers in place of the job (ignore), else the job id', async () => {
    const first = job({});
    expect(await runEnqueueChain([], first, undefined, () => Promise.resolve('0190-holder'))).to.equal('0190-holder');
    expect(await runEnqueueChain([async (_j, next) => next()], first, undefined, () => Promise.resolve('0190-holder'))).to.equal(
      '0190-holder',
    );
    expect(await runEnqueueChain([], first, undefined, () => Promise.resolve())).to.equal(first.id);
  });

  it('DuplicateJobError carries the OJS details: existing_job_id, existing_job_state, uniqueness_key', () => {
    const err = new DuplicateJobError('mail', 'email.send', { id: 'j1', state: 'active' }, 'abc');
    expect(err.code).to.equal('DUPLICATE');
    expect(err.details).to.deep.equal({ existing_job_id: 'j1', existing_job_state: 'active', uniqueness_key: 'abc' });
  });
});
