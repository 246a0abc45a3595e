import { expect } from 'chai';
import type { PublishChannel } from '../../src/broker/confirm-publisher.js';
import { JobRouter } from '../../src/broker/job-router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { InvalidPayloadError, PayloadMissingError, PublishError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import { fromWire, OJS_HEADERS } from '../../src/job/amqp-mapping.js';
import { createLogger } from '../../src/logging/logger.js';
import { MemoryPayloadStore } from '../../src/payload/memory-payload-store.js';
import { PayloadOffloader } from '../../src/payload/payload-offloader.js';
import { parsePayloadRef } from '../../src/payload/payload-ref.js';

const log = createLogger({ test: 'payload-offloader' }, 'error');
const config = compileConfig({ tenants: ['acme'], queues: { docs: {} } }, 'test');

/** A publish channel that keeps what it was given, and fails when told to. */
class Recorder implements PublishChannel {
  readonly sent: Array<{ content: Buffer; headers: Record<string, unknown> }> = [];
  fail: Error | undefined;
  publish(_exchange: string, _key: string, content: Buffer, options: { headers?: Record<string, unknown> }): Promise<void> {
    if (this.fail !== undefined) return Promise.reject(this.fail);
    this.sent.push({ content, headers: options.headers ?? {} });
    return Promise.resolve();
  }
}

function setup(threshold = 1000): { store: MemoryPayloadStore; offloader: PayloadOffloader; channel: Recorder; router: JobRouter } {
  const store = new MemoryPayloadStore();
  const offloader = new PayloadOffloader({ store, thresholdFor: () => threshold, log });
  const channel = new Recorder();
  return { store, offloader, channel, router: new JobRouter(config, channel, offloader) };
}

const big = 'x'.repeat(5000);

describe('payload offloading', () => {
  it('sends a job above the threshold without its arguments, by a committed reference to them', async () => {
    const { store, router, channel } = setup();
    const job = createJob({ type: 'doc', args: [big, { n: 1 }] }, { queue: 'docs', tenant: 'acme' });
    await router.send(job);
    const [sent] = channel.sent;
    expect(sent.content.length).to.be.lessThan(1000);
    expect(JSON.parse(sent.content.toString()).args).to.deep.equal([]);
    const key = parsePayloadRef(sent.headers[OJS_HEADERS.payloadRef]);
    expect(key.tenant).to.equal('acme');
    expect(sent.headers[OJS_HEADERS.payloadSize]).to.equal(Buffer.byteLength(JSON.stringify(job.args)));
    expect(JSON.parse((await store.get(key))!.toString())).to.deep.equal([big, { n: 1 }]);
    expect(store.committed(key)).to.equal(true);
  });

  it('sends a job at or below the threshold inline, storing nothing', async () => {
    const { store, router, channel } = setup(100_000);
    await router.send(createJob({ type: 'doc', args: [big] }, { queue: 'docs', tenant: 'acme' }));
    expect(channel.sent[0].headers).not.to.have.property(OJS_HEADERS.payloadRef);
    expect(JSON.parse(channel.sent[0].content.toString()).args).to.deep.equal([big]);
    expect(await store.count()).to.equal(0);
  });

  it('deletes the payload again when its job could not be published', async () => {
    const { store, router, channel } = setup();
    channel.fail = new PublishError('refused', 'x', 'y', false);
    let thrown: unknown;
    await router.send(createJob({ type: 'doc', args: [big] }, { queue: 'docs', tenant: 'acme' })).catch((err: unknown) => (thrown = err));
    expect(thrown).to.be.instanceOf(PublishError);
    expect(await store.count()).to.equal(0);
  });

  it('loads the arguments back for the tenant they belong to only; a missing one is PAYLOAD_MISSING', async () => {
    const { store, router, channel, offloader } = setup();
    await router.send(createJob({ type: 'doc', args: [big] }, { queue: 'docs', tenant: 'acme' }));
    const { headers } = fromWire({ content: channel.sent[0].content, properties: { headers: channel.sent[0].headers } });
    expect(await offloader.load(headers, 'acme', 'q')).to.deep.equal([big]);
    expect(await offloader.load({}, 'acme', 'q')).to.equal(undefined);
    const refused = await offloader.load(headers, 'globex', 'q').catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(InvalidPayloadError);
    expect((refused as Error).message).to.match(/tenant "acme"/);
    const traversal = await offloader.load({ [OJS_HEADERS.payloadRef]: 'acme/../globex/x' }, 'acme', 'q').catch((err: unknown) => err);
    expect(traversal).to.be.instanceOf(InvalidPayloadError);
    offloader.release(headers);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await store.count()).to.equal(0);
    const missing = await offloader.load(headers, 'acme', 'q').catch((err: unknown) => err);
    expect(missing).to.be.instanceOf(PayloadMissingError);
    expect(missing).to.include({ code: 'PAYLOAD_MISSING' });
  });
});
