import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { createLogger } from '../../src/logging/logger.js';
import { DIRECTIVE_TTL_MS, DirectiveGate } from '../../src/runner/handling/directive-gate.js';

const log = createLogger({ test: 'directive-gate' }, 'error');

/** A connection whose channels answer passive declares from `markers`, counting them; a miss closes the channel as the broker's 404 does. */
function fakeBroker(markers: Set<string>, answered: Promise<void> = Promise.resolve()): { connection: AmqpConnection; probes: string[] } {
  const probes: string[] = [];
  const connection = {
    createChannel: () => {
      let open = true;
      return Promise.resolve({
        on: () => undefined,
        close: () => Promise.resolve(),
        checkExchange: (name: string) => {
          if (!open) return Promise.reject(new Error('channel closed'));
          probes.push(name);
          // The broker's answer is of the moment it was asked; it may arrive later (`answered`).
          if (markers.has(name)) return answered.then(() => ({}));
          open = false;
          return answered.then(() => Promise.reject(Object.assign(new Error('NOT_FOUND'), { code: 404 })));
        },
      });
    },
  } as unknown as AmqpConnection;
  return { connection, probes };
}

const job = (batch?: string, tenant = 'acme'): { tenant: string; meta: Record<string, unknown> } => ({
  tenant,
  meta: batch === undefined ? {} : { batch },
});

describe('directive gate', () => {
  it('probes each marker once, then answers from memory without a promise', async () => {
    const { connection, probes } = fakeBroker(new Set());
    const gate = new DirectiveGate('p', log);
    gate.attach(connection);
    expect(await gate.verdict(job('b1'))).to.equal('run');
    expect(probes).to.deep.equal(['p.batch-cancelled.b1', 'p.tenant-paused.acme', 'p.batch-paused.b1']);
    expect(gate.verdict(job('b1'))).to.equal('run');
    expect(probes).to.have.length(3);
  });

  it('decides cancel before a tenant pause, and a tenant pause before a batch pause', async () => {
    const markers = new Set(['p.batch-paused.b1', 'p.tenant-paused.acme']);
    const { connection } = fakeBroker(markers);
    const gate = new DirectiveGate('p', log);
    gate.attach(connection);
    expect(await gate.verdict(job('b1'))).to.equal('park-tenant');
    expect(await gate.verdict(job('b1', 'globex'))).to.equal('park-batch');
    markers.add('p.batch-cancelled.b1');
    gate.forget({ batch: 'b1' });
    expect(await gate.verdict(job('b1'))).to.equal('cancel');
    expect(await gate.verdict(job(undefined, 'acme'))).to.equal('park-tenant');
    expect(await gate.verdict({ meta: {} })).to.equal('run');
  });

  it('reads a marker again after a directive names it, after a reconnect, and after the TTL', async () => {
    const markers = new Set<string>();
    const { connection, probes } = fakeBroker(markers);
    let now = 0;
    const gate = new DirectiveGate('p', log, () => now);
    gate.attach(connection);
    expect(await gate.verdict(job('b1'))).to.equal('run');
    markers.add('p.batch-paused.b1');
    expect(gate.verdict(job('b1'))).to.equal('run'); // remembered: no directive message yet
    gate.forget({ batch: 'b1' });
    expect(await gate.verdict(job('b1'))).to.equal('park-batch');
    markers.delete('p.batch-paused.b1');
    gate.attach(connection);
    expect(await gate.verdict(job('b1'))).to.equal('run');
    markers.add('p.tenant-paused.acme');
    const before = probes.length;
    now += DIRECTIVE_TTL_MS + 1;
    expect(await gate.verdict(job('b1'))).to.equal('park-tenant');
    expect(probes.length).to.equal(before + 3);
  });

  it('does not remember an answer asked for before a directive forgot it', async () => {
    const markers = new Set<string>();
    let answer!: () => void;
    const { connection, probes } = fakeBroker(markers, new Promise<void>((resolve) => (answer = resolve)));
    const gate = new DirectiveGate('p', log);
    gate.attach(connection);
    const asked = gate.verdict(job('b1', 'globex'));
    while (probes.length === 0) await new Promise((resolve) => setImmediate(resolve));
    // Asked before the cancel; the directive's message arrives before the broker's answer.
    markers.add('p.batch-cancelled.b1');
    gate.forget({ batch: 'b1' });
    answer();
    expect(await asked).to.equal('run');
    expect(await gate.verdict(job('b1', 'globex'))).to.equal('cancel');
  });

  it('checks a park against the broker again, so a job meets a resume that its memory missed', async () => {
    const markers = new Set(['p.batch-paused.b1']);
    const { connection } = fakeBroker(markers);
    const gate = new DirectiveGate('p', log);
    gate.attach(connection);
    expect(await gate.verdict(job('b1'))).to.equal('park-batch');
    markers.clear();
    expect(await gate.stillParked(job('b1'), 'park-batch')).to.equal(false);
    expect(gate.verdict(job('b1'))).to.equal('run');
  });
});
