import { expect } from 'chai';
import { brokerDeath } from '../../src/dead-letters/broker-death.js';
import { causeOfDeath } from '../../src/dead-letters/dead-letter-actions.js';
import type { Job } from '../../src/job/job.types.js';

const WORK = 'ojs.queue.work.acme';
/** 2024-01-02T03:04:05Z, as amqplib decodes an AMQP timestamp. */
const TIME = { '!': 'timestamp', value: 1704164645 };

/** Headers as RabbitMQ sets them on a message it dead-lettered once. */
function deadOnce(reason: string, entry: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    'x-death': [{ count: 1, reason, queue: WORK, time: TIME, exchange: 'ojs.tenant.acme', 'routing-keys': ['work'], ...entry }],
    'x-first-death-reason': reason,
    'x-first-death-queue': WORK,
    'x-first-death-exchange': 'ojs.tenant.acme',
  };
}

describe('brokerDeath', () => {
  it('is undefined for a message the broker never dead-lettered', () => {
    expect(brokerDeath(undefined)).to.equal(undefined);
    expect(brokerDeath({})).to.equal(undefined);
    expect(brokerDeath({ 'x-ojs-error-type': 'TypeError' })).to.equal(undefined);
  });

  it('maps an expired per-message TTL (enqueue_ttl) to EXPIRED, naming the queue and the TTL', () => {
    expect(brokerDeath(deadOnce('expired', { 'original-expiration': '1000' }))).to.deep.equal({
      type: 'EXPIRED',
      message: `expired in ${WORK} (enqueue_ttl 1000 ms)`,
      reason: 'expired',
      queue: WORK,
      at: '2024-01-02T03:04:05.000Z',
    });
  });

  it("says it was the queue's own TTL when the broker records no original expiration", () => {
    expect(brokerDeath(deadOnce('expired'))).to.include({ type: 'EXPIRED', message: `expired in ${WORK} (the queue's message TTL)` });
  });

  it('maps maxlen (drop_oldest overflow) to QUEUE_FULL', () => {
    expect(brokerDeath(deadOnce('maxlen'))).to.include({
      type: 'QUEUE_FULL',
      message: `overflowed in ${WORK} (max_size reached, overflow_policy drop_oldest)`,
    });
  });

  it('maps rejected (nack without requeue) to REJECTED', () => {
    expect(brokerDeath(deadOnce('rejected'))).to.include({
      type: 'REJECTED',
      message: `rejected in ${WORK} (a stage refused it without a reason it could publish)`,
    });
  });

  it("maps a quorum queue's delivery_limit to DELIVERY_LIMIT", () => {
    expect(brokerDeath(deadOnce('delivery_limit'))).to.include({
      type: 'DELIVERY_LIMIT',
      message: `delivery limit reached in ${WORK} (redelivered too often)`,
    });
  });

  it('keeps a reason it does not know, as BROKER_DEAD_LETTER', () => {
    expect(brokerDeath(deadOnce('something_new'))).to.include({
      type: 'BROKER_DEAD_LETTER',
      message: `dead-lettered by the broker in ${WORK} (reason "something_new")`,
      reason: 'something_new',
    });
  });

  it('takes the most recent death (first in x-death), not x-first-death-*, for a job that went through the delay ladder', () => {
    const headers = {
      'x-death': [
        { count: 1, reason: 'maxlen', queue: WORK, time: TIME },
        { count: 1, reason: 'expired', queue: 'ojs.delay.1', time: { '!': 'timestamp', value: 1704164640 } },
        { count: 1, reason: 'expired', queue: 'ojs.delay.0', time: { '!': 'timestamp', value: 1704164642 } },
      ],
      'x-first-death-reason': 'expired',
      'x-first-death-queue': 'ojs.delay.1',
    };
    expect(brokerDeath(headers)).to.include({ type: 'QUEUE_FULL', queue: WORK, at: '2024-01-02T03:04:05.000Z' });
  });

  it('falls back to x-last-death-* and then x-first-death-* without a readable x-death', () => {
    expect(brokerDeath({ 'x-first-death-reason': 'rejected', 'x-first-death-queue': WORK })).to.include({
      type: 'REJECTED',
      queue: WORK,
      at: undefined,
    });
    expect(
      brokerDeath({
        'x-death': 'garbled',
        'x-last-death-reason': 'maxlen',
        'x-last-death-queue': 'q2',
        'x-first-death-reason': 'expired',
        'x-first-death-queue': 'q1',
      }),
    ).to.include({ type: 'QUEUE_FULL', queue: 'q2' });
  });

  it('reads byte-array strings and a bare-number timestamp, and says so when the queue is unknown', () => {
    const death = brokerDeath({ 'x-death': [{ reason: Buffer.from('expired'), time: 1704164645 }] });
    expect(death).to.include({ type: 'EXPIRED', queue: undefined, at: '2024-01-02T03:04:05.000Z' });
    expect(death?.message).to.equal("expired in an unknown queue (the queue's message TTL)");
  });
});

describe('causeOfDeath (dead list and dead retry)', () => {
  const job = (extra: Partial<Job> = {}): Job => ({
    specversion: '1.0',
    id: '0190f0e0-0000-7000-8000-000000000000',
    type: 't',
    queue: 'work',
    args: [],
    meta: {},
    attempt: 1,
    created_at: '2024-01-02T03:00:00.000Z',
    ...extra,
  });

  it('derives the error and the time from x-death for a dead letter the broker made', () => {
    expect(causeOfDeath(deadOnce('expired', { 'original-expiration': '5000' }), job())).to.deep.equal({
      error: { type: 'EXPIRED', message: `expired in ${WORK} (enqueue_ttl 5000 ms)` },
      deadLetteredAt: '2024-01-02T03:04:05.000Z',
    });
  });

  it("keeps a stage's own error even when the delivery carried x-death from the delay ladder", () => {
    const headers = { ...deadOnce('expired'), 'x-ojs-error-type': 'TypeError', 'x-ojs-error-message': 'boom' };
    const stageDead = job({ error: { type: 'TypeError', message: 'boom' }, meta: { dead_lettered_at: '2024-01-02T03:05:00.000Z' } });
    expect(causeOfDeath(headers, stageDead)).to.deep.equal({
      error: { type: 'TypeError', message: 'boom' },
      deadLetteredAt: '2024-01-02T03:05:00.000Z',
    });
  });

  it('trusts the envelope over stale x-ojs-error-* headers: a retried job keeps its headers, not its error', () => {
    const headers = { ...deadOnce('maxlen'), 'x-ojs-error-type': 'TypeError', 'x-ojs-error-message': 'an earlier life' };
    const retried = job({ meta: { dead_lettered_at: '2024-01-01T00:00:00.000Z' } });
    expect(causeOfDeath(headers, retried)).to.deep.equal({
      error: { type: 'QUEUE_FULL', message: `overflowed in ${WORK} (max_size reached, overflow_policy drop_oldest)` },
      deadLetteredAt: '2024-01-02T03:04:05.000Z',
    });
  });

  it('reads the x-ojs-error-* headers of a message that is not a job', () => {
    const headers = {
      'x-ojs-error-type': 'INVALID_PAYLOAD',
      'x-ojs-error-message': 'the body is not JSON',
      'x-ojs-dead-lettered-at': 'then',
    };
    expect(causeOfDeath(headers, undefined)).to.deep.equal({
      error: { type: 'INVALID_PAYLOAD', message: 'the body is not JSON' },
      deadLetteredAt: 'then',
    });
  });

  it('knows nothing of a message with neither', () => {
    expect(causeOfDeath({}, job())).to.deep.equal({ error: undefined, deadLetteredAt: undefined });
  });
});
