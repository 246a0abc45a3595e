import { existsSync } from 'node:fs';
import amqplib from 'amqplib';
import { expect } from 'chai';
import { BrokerNode, brokerNodeUnsupported } from '../helpers/broker-node.js';
import { RawBroker } from '../helpers/raw-broker.js';

/** The private-node helper the fault tests stand on. */
describe('a private broker node (test helper)', function () {
  this.timeout(120_000);
  let node: BrokerNode | undefined;

  before(async function () {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    node = await BrokerNode.start();
  });

  after(() => node?.remove());

  it('keeps durable queues and persistent messages across stop_app/start_app, and leaves nothing behind', async () => {
    const n = node as BrokerNode;
    expect(n.amqpPort).to.not.equal(5672);
    expect(await n.ctl(['eval', 'node().'])).to.include(n.nodename);
    const c = await amqplib.connect(n.url);
    const ch = await c.createConfirmChannel();
    await ch.assertQueue('kept', { durable: true });
    await ch.assertQueue('lost', { durable: false });
    ch.sendToQueue('kept', Buffer.from('one'), { persistent: true });
    ch.sendToQueue('lost', Buffer.from('two'), { persistent: true });
    await ch.waitForConfirms();
    await c.close();

    await n.stopApp();
    await n.startApp();

    const raw = await RawBroker.connect(n.url);
    try {
      expect(await raw.count('kept')).to.equal(1);
      expect(await raw.exists('lost')).to.equal(false);
    } finally {
      await raw.close();
    }

    await n.remove();
    expect(existsSync(n.dir), n.dir).to.equal(false);
    expect(
      await n.ctl(['ping']).then(
        () => 'answers',
        () => 'gone',
      ),
    ).to.equal('gone');
  });
});
