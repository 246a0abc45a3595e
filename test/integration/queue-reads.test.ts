import { expect } from 'chai';
import { listDeadLetters, retryDeadLetters, type DeadLetterEntry } from '../../src/admin/dead-letters-admin.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { peekMessage } from '../../src/dashboard/peek-message.js';
import { createJob } from '../../src/job/envelope.js';
import { toWire } from '../../src/job/amqp-mapping.js';
import { createLogger } from '../../src/logging/logger.js';
import { MemoryPayloadStore } from '../../src/payload/memory-payload-store.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { RawBroker } from '../helpers/raw-broker.js';

const log = createLogger({ test: 'queue-reads' }, 'error');

/**
 * Reads that hold messages unacknowledged until their channel closes (a listing, a peek, a
 * retry) take each other's messages when they overlap: the admin server, whose dashboard
 * refreshes a dead-letter list every few seconds while an operator opens a body or retries,
 * runs them one at a time.
 */
describe('reads of one queue in one process (dead-letter listing, peek, retry)', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let raw: RawBroker;
  let deadQueue: string;
  const ids: string[] = [];

  before(async () => {
    config = withTestConfig({ tenants: ['acme'], queues: { in: {} } });
    await declareTopologyOnce(config, provisionTopology(config, []), log);
    raw = await RawBroker.connect(config.broker.url);
    deadQueue = new BrokerNames(config.prefix).deadQueue('in', 'acme');
    for (let i = 0; i < 5; i++) {
      const job = createJob({ type: 'doc', args: [i] }, { queue: 'in', tenant: 'acme' });
      const wire = toWire({ ...job, error: { type: 'RefusedError', message: 'no' } }, { tenantHeader: config.tenantHeader });
      await raw.publish('', deadQueue, wire.content, wire.options);
      ids.push(job.id);
    }
  });

  after(async () => {
    await raw?.close();
    await teardown(config, []);
  });

  it('never finds the queue emptied by another read running at the same moment', async () => {
    const store = new MemoryPayloadStore();
    for (let round = 0; round < 10; round++) {
      const list = (): Promise<DeadLetterEntry[]> => listDeadLetters(config, 'in', 'acme', log, 100, store);
      const [first, peeked, last] = await Promise.all([
        list(),
        Promise.all(ids.map((id) => peekMessage(config, log, deadQueue, id, store))),
        list(),
      ]);
      expect(first.map((entry) => entry.id)).to.deep.equal(ids);
      expect(last.map((entry) => entry.id)).to.deep.equal(ids);
      expect(peeked.map((message) => message.message_id)).to.deep.equal(ids);
    }
    expect(await raw.count(deadQueue)).to.equal(5);
  });

  it('retries every dead letter while listings of the queue run beside it', async () => {
    const store = new MemoryPayloadStore();
    const [, retried] = await Promise.all([
      listDeadLetters(config, 'in', 'acme', log, 100, store),
      retryDeadLetters(config, 'in', 'acme', log),
      listDeadLetters(config, 'in', 'acme', log, 100, store),
    ]);
    expect(retried).to.include({ retried: 5 });
    expect(await raw.count(deadQueue)).to.equal(0);
  });
});
