import { expect } from 'chai';
import amqplib from 'amqplib';
import { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import { QueueFullError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';

const log = createLogger({ test: 'quorum-refusal' }, 'error');

/**
 * A quorum queue's refusal is read before it is believed (src/broker/refusal-cause.ts), against
 * the broker: a queue really at its `max_size` must stay QUEUE_FULL, so the check has to read the
 * same count the broker bounds (ready messages). A queue without a leader needs a cluster to
 * lose its majority; cluster.test.ts halts the node that leads every queue.
 */
describe('a quorum queue at its max_size: its refusal is read and stands as QUEUE_FULL', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let publisher: Publisher;
  /** What the queue held when it refused (the first test). */
  let full = 0;

  before(async () => {
    project = await writeConfigFile(
      { durable: true, tenants: ['acme'], queues: { out: { type: 'quorum', max_size: 2 } } },
      [{ name: 'relay', input: 'in', outputs: ['out'] }],
      'quorum-refusal',
    );
    publisher = await Publisher.connect(project.config, { log });
  });

  after(async () => {
    await publisher?.close();
    await project?.remove();
  });

  it('refuses a job once it holds its max_size, as QUEUE_FULL (not transient): the check read it full', async () => {
    // A quorum queue may take one job past its bound before it refuses (its limit is checked
    // after each enqueue), so this publishes until the first refusal, at most 5.
    const queue = project.names.queue('out', 'acme');
    let taken = 0;
    let refusal: unknown;
    while (refusal === undefined && taken < 5) {
      try {
        await publisher.publish('out', { type: 'doc', args: [taken], tenant: 'acme' });
        taken++;
      } catch (err) {
        refusal = err;
      }
    }
    expect(refusal).to.be.instanceOf(QueueFullError).and.to.include({ code: 'QUEUE_FULL', transient: false, queue: 'out', tenant: 'acme' });
    expect(taken).to.be.within(2, 3);
    expect(await project.raw.count(queue)).to.equal(taken);
    full = taken;
  });

  it("readyMessages reads a queue's ready jobs on a channel of its own: undefined for a missing queue, the publisher unharmed", async () => {
    const connection = await amqplib.connect(project.config.broker.url);
    try {
      const confirms = await ConfirmPublisher.open(connection);
      expect(await confirms.readyMessages(project.names.queue('out', 'acme')))
        .to.equal(full)
        .and.to.be.above(0);
      expect(await confirms.readyMessages(`${project.config.prefix}.no-such-queue`)).to.equal(undefined);
      expect(confirms.isOpen).to.equal(true);
      await confirms.publish(project.names.direct, 'nowhere', Buffer.from('{}'), {});
      await confirms.close();
    } finally {
      await connection.close();
    }
  });
});
