import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import type { ResolvedRetryPolicy, RetryPolicy } from '../../src/config/config.types.js';
import { compileRetryPolicy } from '../../src/config/queue-resolver.js';
import { InvalidPayloadError, NonRetryableError, StagecoachError, UnknownOutputError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import { decideFailure } from '../../src/retry/failure-decision.js';
import { resolveRetryPolicy, retryDelayMs, validateRetryPolicy } from '../../src/retry/retry-policy.js';
import { DeadLetterJob, DiscardJob, RetryJob } from '../../src/retry/handler-outcomes.js';

const policy = (over: Partial<RetryPolicy> = {}): ResolvedRetryPolicy =>
  compileRetryPolicy({
    max_attempts: 3,
    initial_interval: 'PT1S',
    backoff_coefficient: 2,
    max_interval: 'PT5M',
    jitter: false,
    non_retryable_errors: [],
    on_exhaustion: 'dead_letter',
    ...over,
  });
const err = (type = 'Error') => ({ type, message: 'boom' });

describe('OJS retry policy', () => {
  it('waits initial * coefficient^(n-1) after attempt n, capped at max_interval', () => {
    const p = policy({ initial_interval: 'PT1S', backoff_coefficient: 3, max_interval: 'PT20S' });
    expect([1, 2, 3, 4].map((n) => retryDelayMs(p, n))).to.deep.equal([1000, 3000, 9000, 20000]);
  });

  it('grows the wait by its backoff_strategy: polynomial n^coefficient, linear n, none 1 (OJS retry section 3)', () => {
    const waits = (over: Partial<RetryPolicy>): number[] =>
      [1, 2, 3, 4].map((n) => retryDelayMs(policy({ initial_interval: 'PT1S', max_interval: 'PT10S', ...over }), n));
    expect(waits({ backoff_strategy: 'linear', backoff_coefficient: 3 })).to.deep.equal([1000, 2000, 3000, 4000]);
    expect(waits({ backoff_strategy: 'none', backoff_coefficient: 3 })).to.deep.equal([1000, 1000, 1000, 1000]);
    expect(waits({ backoff_strategy: 'polynomial', backoff_coefficient: 2 })).to.deep.equal([1000, 4000, 9000, 10000]);
    expect(() => validateRetryPolicy({ backoff_strategy: 'fibonacci' })).to.throw(/backoff_strategy must be one of/);
  });

  it('multiplies the capped wait by a jitter factor in [0.5, 1.5)', () => {
    const p = policy({ jitter: true, max_interval: 'PT2S' });
    expect(retryDelayMs(p, 1, 0)).to.equal(500);
    expect(retryDelayMs(p, 1, 0.999)).to.be.closeTo(1499, 1);
    expect(retryDelayMs(p, 5, 0.5)).to.equal(2000);
  });

  it("takes the job's own fields over the queue's, field by field", () => {
    const config = compileConfig({
      queues: { _default: { default_retry: { initial_interval: 'PT3S' } }, q: { default_retry: { max_attempts: 9 } } },
    });
    const queue = config.queues.get('q');
    if (!queue) throw new Error('no queue');
    expect(resolveRetryPolicy(queue, undefined)).to.include({ max_attempts: 9, initial_interval: 'PT3S', jitter: true });
    expect(resolveRetryPolicy(queue, { max_attempts: 2, jitter: false })).to.include({
      max_attempts: 2,
      initial_interval: 'PT3S',
      jitter: false,
    });
  });

  const invalid: Array<[string, unknown, RegExp]> = [
    ['zero attempts', { max_attempts: 0 }, /max_attempts/],
    ['a fractional attempt count', { max_attempts: 1.5 }, /max_attempts/],
    ['a non-ISO interval', { initial_interval: '10s' }, /initial_interval/],
    ['a coefficient below 1', { backoff_coefficient: 0.5 }, /backoff_coefficient/],
    ['an unknown field', { retries: 3 }, /unknown field "retries"/],
    ['an unknown exhaustion', { on_exhaustion: 'explode' }, /on_exhaustion/],
    ['not an object', 'often', /must be an object/],
  ];
  for (const [what, retry, reason] of invalid) {
    it(`refuses ${what} when the job is created (INVALID_RETRY_POLICY)`, () => {
      expect(() => validateRetryPolicy(retry))
        .to.throw(StagecoachError, reason)
        .with.property('code', 'INVALID_RETRY_POLICY');
    });
  }

  it('refuses an invalid policy on publish', () => {
    expect(() => createJob({ type: 't', retry: { max_attempts: 0 } }, { queue: 'q' })).to.throw(/job "t": retry: max_attempts/);
  });
});

describe('failure decisions', () => {
  it('retries until max_attempts attempts were made, then dead-letters', () => {
    expect(decideFailure(policy(), 1, err(), new Error())).to.deep.equal({ kind: 'retried', nextAttempt: 2, delayMs: 1000 });
    expect(decideFailure(policy(), 2, err(), new Error())).to.deep.equal({ kind: 'retried', nextAttempt: 3, delayMs: 2000 });
    expect(decideFailure(policy(), 3, err(), new Error())).to.deep.equal({ kind: 'dead-lettered', exhausted: true });
  });

  it('never retries when max_attempts is 1, and discards on exhaustion when asked', () => {
    expect(decideFailure(policy({ max_attempts: 1 }), 1, err(), new Error())).to.deep.equal({ kind: 'dead-lettered', exhausted: true });
    expect(decideFailure(policy({ max_attempts: 1, on_exhaustion: 'discard' }), 1, err(), new Error())).to.deep.equal({
      kind: 'discarded',
      exhausted: true,
    });
  });

  it('dead-letters non-retryable errors by exact type and by prefix.*', () => {
    const p = policy({ non_retryable_errors: ['AuthError', 'Validation.*'] });
    expect(decideFailure(p, 1, err('AuthError'), new Error()).kind).to.equal('dead-lettered');
    expect(decideFailure(p, 1, err('Validation.Email'), new Error()).kind).to.equal('dead-lettered');
    expect(decideFailure(p, 1, err('ValidationError'), new Error()).kind).to.equal('retried');
    expect(decideFailure(p, 1, err('Auth'), new Error()).kind).to.equal('retried');
  });

  it('never retries invalid payloads, unknown outputs and NonRetryableError', () => {
    for (const thrown of [new InvalidPayloadError('bad'), new UnknownOutputError('s', 'o', []), new NonRetryableError('no')]) {
      expect(decideFailure(policy(), 1, err(), thrown)).to.deep.equal({ kind: 'dead-lettered', exhausted: false });
    }
  });

  it('follows the handler outcomes RETRY (with its delay), DISCARD and DEAD_LETTER', () => {
    expect(decideFailure(policy(), 1, err(), new RetryJob('PT45S'))).to.deep.equal({ kind: 'retried', nextAttempt: 2, delayMs: 45000 });
    expect(decideFailure(policy(), 3, err(), new RetryJob('PT45S'))).to.deep.equal({ kind: 'dead-lettered', exhausted: true });
    expect(decideFailure(policy(), 1, err(), new DiscardJob())).to.deep.equal({ kind: 'discarded', exhausted: false });
    expect(decideFailure(policy(), 1, err(), new DeadLetterJob())).to.deep.equal({ kind: 'dead-lettered', exhausted: false });
    expect(() => new RetryJob('soon')).to.throw(/not an ISO 8601 duration/);
  });
});
