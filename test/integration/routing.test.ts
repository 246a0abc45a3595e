import { expect } from 'chai';
import { replayUnroutable } from '../../src/dead-letters/unroutable.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { UnroutableJobError } from '../../src/errors/errors.js';
import { Publisher } from '../../src/publisher/publisher.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology, tenantTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { RawBroker } from '../helpers/raw-broker.js';

const log = createLogger({ test: 'routing' }, 'error');
const PDF = 'application/pdf';
const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const stages: StageMetadata[] = [
  { name: 'explorer', input: 'scan-specs', outputs: ['conversions'] },
  { name: 'converter', input: 'conversions', outputs: [] },
];

/**
 * Routing is enforced by the broker: these tests publish with plain amqplib, as a producer
 * written in another language would, and look only at where messages land.
 */
describe('tenant routing on the broker', function () {
  let config: CompiledConfig;
  let names: BrokerNames;
  let raw: RawBroker;
  let watched: string[];

  before(async () => {
    config = withTestConfig({
      tenants: ['acme', 'globex'],
      queues: {
        'scan-specs': { scope: 'shared' },
        conversions: { scope: 'tenant', variants: { by: 'mime', values: { pdf: [PDF], office: [DOCX] } } },
      },
    });
    names = new BrokerNames(config.prefix);
    await declareTopologyOnce(config, provisionTopology(config, stages), log);
    raw = await RawBroker.connect(config.broker.url);
    watched = [
      names.unroutable,
      names.queue('scan-specs'),
      ...['acme', 'globex'].flatMap((t) => [
        names.queue('conversions', t),
        names.queue('conversions', t, 'pdf'),
        names.queue('conversions', t, 'office'),
      ]),
    ];
  });

  after(async () => {
    await raw.close();
    await teardown(config, stages, tenantTopology(config, 'initech'), provisionTopology(config, stages, 'initech'));
  });

  /** Publishes one message, then returns where it landed: queue -> count, every watched queue drained. */
  async function landing(exchange: string, routingKey: string, headers: Record<string, string>): Promise<Record<string, number>> {
    await raw.publish(exchange, routingKey, JSON.stringify({ id: 'x', type: 't', queue: routingKey, args: [] }), { headers });
    const landed: Record<string, number> = {};
    for (const queue of watched) {
      const taken = await raw.drain(queue);
      if (taken.length > 0) landed[queue] = taken.length;
    }
    return landed;
  }

  it("routes a tenant's job to its general queue only", async () => {
    expect(await landing(names.root, 'conversions', { 'x-ojs-tenant': 'acme', mime: 'text/plain' })).to.deep.equal({
      [names.queue('conversions', 'acme')]: 1,
    });
  });

  it("routes a job whose variant header matches to the tenant's variant queue only", async () => {
    expect(await landing(names.root, 'conversions', { 'x-ojs-tenant': 'acme', mime: PDF })).to.deep.equal({
      [names.queue('conversions', 'acme', 'pdf')]: 1,
    });
    expect(await landing(names.root, 'conversions', { 'x-ojs-tenant': 'globex', mime: DOCX })).to.deep.equal({
      [names.queue('conversions', 'globex', 'office')]: 1,
    });
  });

  it('never delivers a job of one tenant to another tenant, whatever its other headers', async () => {
    for (const mime of ['text/plain', PDF, DOCX]) {
      const landed = await landing(names.root, 'conversions', { 'x-ojs-tenant': 'globex', mime });
      expect(Object.keys(landed)).to.have.length(1);
      expect(Object.keys(landed)[0]).to.contain('.globex');
    }
  });

  it('control: the same binding with plain x-match "all" would leak across tenants (the trap the tests guard)', async () => {
    const leaky = `${config.prefix}.leaky`;
    const probe = `${config.prefix}.leaky.acme`;
    const connection = await (await import('amqplib')).default.connect(config.broker.url);
    try {
      const ch = await connection.createChannel();
      await ch.assertExchange(leaky, 'headers', { durable: false, autoDelete: true });
      await ch.assertQueue(probe, { durable: false, autoDelete: false });
      await ch.bindQueue(probe, leaky, '', { 'x-match': 'all', 'x-ojs-tenant': 'acme' });
      ch.publish(leaky, 'conversions', Buffer.from('{}'), { headers: { 'x-ojs-tenant': 'globex' } });
      await ch.close();
      expect((await raw.drain(probe)).length).to.equal(1, 'plain "all" ignores x- headers and matches every tenant');
      const cleanup = await connection.createChannel();
      await cleanup.deleteQueue(probe);
      await cleanup.deleteExchange(leaky);
    } finally {
      await connection.close();
    }
  });

  it('keeps a job for an unknown tenant in ojs.unroutable with its headers intact', async () => {
    await raw.publish(names.root, 'conversions', '{"id":"u1"}', { headers: { 'x-ojs-tenant': 'initech', mime: PDF }, messageId: 'u1' });
    const [kept, ...rest] = await raw.drain(names.unroutable);
    expect(rest).to.have.length(0);
    expect(kept.fields.routingKey).to.equal('conversions');
    expect(kept.properties.messageId).to.equal('u1');
    expect(kept.properties.headers).to.include({ 'x-ojs-tenant': 'initech', mime: PDF });
  });

  it('keeps jobs with no tenant header, for a queue no stage declared, or for an unknown shared queue', async () => {
    expect(await landing(names.root, 'conversions', { mime: PDF })).to.deep.equal({ [names.unroutable]: 1 });
    expect(await landing(names.root, 'no_such_queue', { 'x-ojs-tenant': 'acme' })).to.deep.equal({ [names.unroutable]: 1 });
    expect(await landing(names.direct, 'no_such_queue', {})).to.deep.equal({ [names.unroutable]: 1 });
  });

  it('routes shared queues through ojs.direct by logical queue name', async () => {
    expect(await landing(names.direct, 'scan-specs', { 'x-ojs-tenant': 'acme' })).to.deep.equal({ [names.queue('scan-specs')]: 1 });
  });

  it('routes jobs published with the Publisher the same way', async () => {
    const publisher = await Publisher.connect(config, { log });
    try {
      await publisher.publish('conversions', { type: 'doc.convert', tenant: 'globex', headers: { mime: PDF } });
      await publisher.publish('scan-specs', { type: 'scan.folder', tenant: 'acme' });
      // Kept in unroutable, and the producer is told so.
      const refused = await publisher.publish('conversions', { type: 'doc.convert', tenant: 'nobody' }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).to.be.instanceOf(UnroutableJobError);
      expect(refused).to.include({ reason: 'tenant-not-provisioned', tenant: 'nobody' });
    } finally {
      await publisher.close();
    }
    const landed: Record<string, number> = {};
    for (const queue of watched) {
      const n = (await raw.drain(queue)).length;
      if (n) landed[queue] = n;
    }
    expect(landed).to.deep.equal({
      [names.queue('conversions', 'globex', 'pdf')]: 1,
      [names.queue('scan-specs')]: 1,
      [names.unroutable]: 1,
    });
  });

  describe('unroutable replay', () => {
    it('keeps jobs whose tenant still does not exist, and moves them once it does', async () => {
      await raw.publish(names.root, 'conversions', '{}', { headers: { 'x-ojs-tenant': 'initech' }, messageId: 'late-1' });
      await raw.publish(names.root, 'conversions', '{}', { headers: { 'x-ojs-tenant': 'initech', mime: PDF }, messageId: 'late-2' });
      expect(await raw.count(names.unroutable)).to.equal(2);

      expect(await replayUnroutable(config, log)).to.deep.equal({ replayed: 0, kept: 2 });
      expect(await raw.count(names.unroutable)).to.equal(2);

      await declareTopologyOnce(config, provisionTopology(config, stages, 'initech'), log);
      expect(await replayUnroutable(config, log)).to.deep.equal({ replayed: 2, kept: 0 });
      expect(await raw.count(names.unroutable)).to.equal(0);
      const general = await raw.drain(names.queue('conversions', 'initech'));
      const pdf = await raw.drain(names.queue('conversions', 'initech', 'pdf'));
      expect(general.map((m) => m.properties.messageId)).to.deep.equal(['late-1']);
      expect(pdf.map((m) => m.properties.messageId)).to.deep.equal(['late-2']);
    });

    it('keeps a job whose tenant exists but no queue takes its logical queue, where it was, and counts it kept', async () => {
      // The tenant exchange exists but nothing is bound for `ghost_queue`: published again, the
      // job would only come back by the tenant exchange's alternate exchange (not replayed).
      await raw.publish(names.root, 'ghost_queue', '{}', { headers: { 'x-ojs-tenant': 'acme' }, messageId: 'ghost-1' });
      // Between them, one a queue does take: replayed, and only it.
      await raw.publish(names.unroutable, 'conversions', '{}', { headers: { 'x-ojs-tenant': 'globex' }, messageId: 'late-globex' });
      await raw.publish(names.root, 'ghost_queue', '{}', { headers: { 'x-ojs-tenant': 'globex' }, messageId: 'ghost-2' });
      expect(await raw.count(names.unroutable)).to.equal(3);

      expect(await replayUnroutable(config, log)).to.deep.equal({ replayed: 1, kept: 2 });
      const kept = await raw.drain(names.unroutable);
      expect(kept.map((m) => m.properties.messageId)).to.deep.equal(['ghost-1', 'ghost-2']);
      expect(kept[0].properties.headers).to.include({ 'x-ojs-tenant': 'acme' });
      const arrived = await raw.drain(names.queue('conversions', 'globex'));
      expect(arrived.map((m) => m.properties.messageId)).to.deep.equal(['late-globex']);
    });
  });
});

describe('tenant routing with a custom tenant header (OS2datascanner "org")', () => {
  let config: CompiledConfig;
  let raw: RawBroker;
  const metas: StageMetadata[] = [{ name: 'worker', input: 'conversions', outputs: [] }];

  before(async () => {
    config = withTestConfig({ tenantHeader: 'org', tenants: ['vejstrand', 'customer'] });
    await declareTopologyOnce(config, provisionTopology(config, metas), log);
    raw = await RawBroker.connect(config.broker.url);
  });
  after(async () => {
    await raw.close();
    await teardown(config, metas);
  });

  it('routes by the configured header and ignores x-ojs-tenant for routing', async () => {
    const names = new BrokerNames(config.prefix);
    await raw.publish(names.root, 'conversions', '{}', { headers: { org: 'vejstrand', 'x-ojs-tenant': 'customer' } });
    await raw.publish(names.root, 'conversions', '{}', { headers: { org: 'customer' } });
    expect(
      await raw.counts([names.queue('conversions', 'vejstrand'), names.queue('conversions', 'customer'), names.unroutable]),
    ).to.deep.equal({
      [names.queue('conversions', 'vejstrand')]: 1,
      [names.queue('conversions', 'customer')]: 1,
      [names.unroutable]: 0,
    });
  });
});
