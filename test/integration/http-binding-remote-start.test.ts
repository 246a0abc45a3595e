import { expect } from 'chai';
import { BrokerNames } from '../../src/topology/names.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import { ojsClient } from '../helpers/ojs-client.js';
import { RawBroker } from '../helpers/raw-broker.js';

const TOKEN = 'test-http-binding-remote-start-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the HTTP binding starts one remote stage per queue', function () {
  this.timeout(60_000);
  let binding: BindingServer | undefined;
  let broker: RawBroker | undefined;

  before(async () => {
    binding = await startBindingServer(
      { queues: { _default: { scope: 'shared' }, burst: {} }, stages: {} },
      'http-binding-remote-start',
      TOKEN,
    );
    broker = await RawBroker.connect();
  });

  after(async () => {
    await broker?.close();
    await binding?.close();
  });

  it("fetches that come at once, before the queue's runner started, share one runner: the queue has one consumer", async () => {
    const { base, project } = binding as BindingServer;
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: ['burst'], worker_id: `w-${i}`, wait_ms: 0 }),
      ),
    );
    for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    // Every fetch was answered after its runner consumed: one runner per fetch would show 8.
    expect(await broker?.consumers(new BrokerNames(project.config.prefix).queue('burst'))).to.equal(1);
  });
});
