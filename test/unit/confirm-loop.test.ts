import { expect } from 'chai';
import type { Message, Options } from 'amqplib';
import { settledReport } from '../../src/tracking-stream/tracking-stream.js';
import type { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import { PublishError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import type { Logger } from '../../src/logging/logger.js';
import { BatchReports } from '../../src/runner/settle/batch-reports.js';
import type { ChannelSupervisor } from '../../src/runner/channels/channel-supervisor.js';
import { ConfirmLoop } from '../../src/runner/settle/confirm-loop.js';
import type { ConsumerSource } from '../../src/runner/channels/consumer-source.js';
import type { Delivery } from '../../src/runner/channels/delivery.js';
import type { Refusal, Route } from '../../src/runner/settle/settlement-route.types.js';

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;
const TRACKING = 'ojs.tracking';

type Mode = 'ok' | 'lost' | 'refuse';

/** A publisher stub: records every publish (exchange, routing key, messageId) and answers by plan, then by mode. */
class StubPublisher {
  readonly published: Array<{ exchange: string; routingKey: string; id: unknown }> = [];
  plan: Mode[] = [];
  constructor(private readonly mode: Mode = 'ok') {}
  publish(exchange: string, routingKey: string, _content: Buffer, options: Options.Publish): Promise<void> {
    this.published.push({ exchange, routingKey, id: options.messageId });
    switch (this.plan.shift() ?? this.mode) {
      case 'ok':
        return Promise.resolve();
      case 'lost':
        return Promise.reject(new PublishError('channel closed', exchange, routingKey, true));
      case 'refuse':
        return Promise.reject(new PublishError('nacked (queue full)', exchange, routingKey, false));
    }
  }
  /** What went to `exchange`, by routing key. */
  to(exchange: string): string[] {
    return this.published.filter((p) => p.exchange === exchange).map((p) => p.routingKey);
  }
}

/** The publisher supervisor stub: ready(stale) answers the current publisher unless stale, else waits for heal(). */
class StubPublishers {
  readonly readyCalls: Array<StubPublisher | undefined> = [];
  private waiting: Array<(p: StubPublisher) => void> = [];
  gone = false;
  constructor(public current: StubPublisher | undefined) {}
  ready(stale?: StubPublisher): Promise<StubPublisher> {
    this.readyCalls.push(stale);
    if (this.gone) return Promise.reject(new Error('connection gone'));
    if (this.current !== undefined && this.current !== stale) return Promise.resolve(this.current);
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  heal(publisher: StubPublisher): void {
    this.current = publisher;
    for (const resolve of this.waiting.splice(0)) resolve(publisher);
  }
}

/** A delivery whose channel records acks and rejects, and can be closed. */
function deliveryOn(): { delivery: Delivery; ops: string[]; close(): void } {
  const ops: string[] = [];
  const source = { closed: false, ack: () => ops.push('ack'), reject: () => ops.push('reject') };
  const message = {
    fields: { deliveryTag: 1 },
    properties: { messageId: 'job-1', headers: {} },
    content: Buffer.from('{}'),
  } as unknown as Message;
  return {
    delivery: { message, source: source as unknown as ConsumerSource, input: 'main', queue: 'q' },
    ops,
    close: () => (source.closed = true),
  };
}

function routeTo(exchange: string, routingKey: string, refusal: Refusal = { kind: 'reject' }, what = 'retry'): Route {
  return {
    what,
    message: { exchange, routingKey, content: Buffer.from('{}'), options: { messageId: `${exchange}/${routingKey}` } },
    refusal,
    result: { kind: 'handed-back' },
  };
}

function setup(publisher: StubPublisher | undefined = new StubPublisher(), waits: number[] = []) {
  const publishers = new StubPublishers(publisher);
  const supervisor = publishers as unknown as ChannelSupervisor<ConfirmPublisher>;
  const reports = new BatchReports({
    publishers: supervisor,
    log: silent,
    tracking: TRACKING,
    tracked: false,
    place: { stage: 's', queue: 'q', tenant: undefined },
  });
  let acks = 0;
  const loop = new ConfirmLoop({
    publishers: supervisor,
    log: silent,
    refusalWaitsMs: waits,
    ack: (delivery) => {
      acks++;
      delivery.source.ack(delivery.message);
    },
    withReport: (publish, report, deadOnRefusal) => reports.withReport(publish, report, deadOnRefusal),
  });
  return { loop, publishers, acks: () => acks };
}

const report = () =>
  settledReport(
    { ...createJob({ type: 't', args: [] }, { queue: 'q' }), meta: { batch: 'b1' } },
    'b1',
    { stage: 's', queue: 'q', tenant: undefined },
    'retrying',
  );

describe('ConfirmLoop', () => {
  it('publishes the route, then acks once', async () => {
    const p = new StubPublisher();
    const { loop, acks } = setup(p);
    const { delivery, ops } = deliveryOn();
    expect(await loop.run(delivery, routeTo('retry', 'k'))).to.equal('acked');
    expect(p.to('retry')).to.deep.equal(['k']);
    expect(ops).to.deep.equal(['ack']);
    expect(acks()).to.equal(1);
  });

  it('a route with nothing to publish and no report is acked without a publisher', async () => {
    const { loop, publishers } = setup(undefined);
    const { delivery, ops } = deliveryOn();
    const route: Route = { what: 'discard report', message: undefined, refusal: { kind: 'reject' }, result: { kind: 'handed-back' } };
    expect(await loop.run(delivery, route)).to.equal('acked');
    expect(ops).to.deep.equal(['ack']);
    expect(publishers.readyCalls).to.deep.equal([]);
  });

  it('a publish lost with the channel is tried again on the healed publisher (ready given the stale one), then acked once', async () => {
    const first = new StubPublisher('lost');
    const { loop, publishers } = setup(first);
    const { delivery, ops } = deliveryOn();
    const settled = loop.run(delivery, routeTo('retry', 'k'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(publishers.readyCalls).to.deep.equal([undefined, first]);
    const healed = new StubPublisher();
    publishers.heal(healed);
    expect(await settled).to.equal('acked');
    expect(healed.to('retry')).to.deep.equal(['k']);
    expect(ops).to.deep.equal(['ack']);
  });

  it('refused with the reject policy: the delivery is rejected, never acked', async () => {
    const { loop } = setup(new StubPublisher('refuse'));
    const { delivery, ops } = deliveryOn();
    expect(await loop.run(delivery, routeTo('retry', 'k'))).to.equal('rejected');
    expect(ops).to.deep.equal(['reject']);
  });

  it('refused with the fallback policy: the fallback route is published and acked; refused there too, rejected', async () => {
    const p = new StubPublisher();
    p.plan = ['refuse'];
    const { loop } = setup(p);
    const { delivery, ops } = deliveryOn();
    const route = routeTo('graveyard', 'g', { kind: 'fallback', route: () => routeTo('dlx', 'own-dead') }, 'dead letter');
    expect(await loop.run(delivery, route)).to.equal('acked');
    expect(p.published.map((x) => x.exchange)).to.deep.equal(['graveyard', 'dlx']);
    expect(ops).to.deep.equal(['ack']);

    const refusing = setup(new StubPublisher('refuse'));
    const second = deliveryOn();
    expect(await refusing.loop.run(second.delivery, route)).to.equal('rejected');
    expect(second.ops).to.deep.equal(['reject']);
  });

  it('refused with the wait policy: published again after each wait, acked when taken; rejected once every wait is spent', async () => {
    const p = new StubPublisher();
    p.plan = ['refuse', 'refuse'];
    const { loop } = setup(p, [1, 1, 1]);
    const { delivery, ops } = deliveryOn();
    expect(await loop.run(delivery, routeTo('retry', 'suspect', { kind: 'wait' }, 'suspect'))).to.equal('acked');
    expect(p.to('retry')).to.have.length(3);
    expect(ops).to.deep.equal(['ack']);

    const always = new StubPublisher('refuse');
    const spent = setup(always, [1, 1]);
    const second = deliveryOn();
    expect(await spent.loop.run(second.delivery, routeTo('retry', 'suspect', { kind: 'wait' }, 'suspect'))).to.equal('rejected');
    expect(always.to('retry')).to.have.length(3);
    expect(second.ops).to.deep.equal(['reject']);
  });

  it('abandons a delivery whose channel closed: before the publish, or while the publisher healed (nothing published there)', async () => {
    const { loop } = setup();
    const closed = deliveryOn();
    closed.close();
    expect(await loop.run(closed.delivery, routeTo('retry', 'k'))).to.equal('abandoned');
    expect(closed.ops).to.deep.equal([]);

    const lost = new StubPublisher('lost');
    const healing = setup(lost);
    const waiting = deliveryOn();
    const settled = healing.loop.run(waiting.delivery, routeTo('retry', 'k'));
    await new Promise((resolve) => setImmediate(resolve));
    waiting.close();
    const healed = new StubPublisher();
    healing.publishers.heal(healed);
    expect(await settled).to.equal('abandoned');
    expect(healed.published).to.deep.equal([]);
    expect(waiting.ops).to.deep.equal([]);
  });

  it('abandons the delivery when no publisher can be had (the connection is gone)', async () => {
    const { loop, publishers } = setup();
    publishers.gone = true;
    const { delivery, ops } = deliveryOn();
    expect(await loop.run(delivery, routeTo('retry', 'k'))).to.equal('abandoned');
    expect(ops).to.deep.equal([]);
  });

  describe('with a batch report (BatchReports.withReport)', () => {
    it('the report goes beside the route in one confirm wait; after a lost channel only what was not confirmed goes again', async () => {
      const first = new StubPublisher();
      first.plan = ['lost', 'ok'];
      const { loop, publishers } = setup(first);
      const { delivery, ops } = deliveryOn();
      const r = report();
      const settled = loop.run(delivery, routeTo('retry', 'k'), r);
      await new Promise((resolve) => setImmediate(resolve));
      const healed = new StubPublisher();
      publishers.heal(healed);
      expect(await settled).to.equal('acked');
      expect(first.published.map((x) => x.exchange)).to.deep.equal(['retry', TRACKING]);
      expect(healed.published.map((x) => x.exchange)).to.deep.equal(['retry']);
      expect(ops).to.deep.equal(['ack']);
    });

    it('report confirmed, then the route refused and rejected: a "dead" report retracts it before the reject', async () => {
      const p = new StubPublisher();
      p.plan = ['refuse', 'ok', 'ok'];
      const { loop } = setup(p);
      const { delivery, ops } = deliveryOn();
      const r = report();
      expect(await loop.run(delivery, routeTo('retry', 'k'), r)).to.equal('rejected');
      expect(p.published.map((x) => [x.exchange, x.id])).to.deep.equal([
        ['retry', 'retry/k'],
        [TRACKING, r.id],
        [TRACKING, `${r.id}.refused`],
      ]);
      expect(ops).to.deep.equal(['reject']);
    });

    it('no "dead" report when the refusal is waited out or falls back: the job is not dead yet', async () => {
      const waited = new StubPublisher();
      waited.plan = ['refuse', 'ok', 'ok'];
      const w = setup(waited, [1]);
      const one = deliveryOn();
      const r = report();
      expect(await w.loop.run(one.delivery, routeTo('retry', 'suspect', { kind: 'wait' }, 'suspect'), r)).to.equal('acked');
      expect(waited.published.map((x) => x.id)).to.deep.equal(['retry/suspect', r.id, 'retry/suspect']);

      const falling = new StubPublisher();
      falling.plan = ['refuse', 'ok', 'ok', 'ok'];
      const f = setup(falling);
      const two = deliveryOn();
      const route = routeTo('graveyard', 'g', { kind: 'fallback', route: () => routeTo('dlx', 'own-dead') }, 'dead letter');
      expect(await f.loop.run(two.delivery, route, r)).to.equal('acked');
      expect(falling.published.map((x) => x.id)).to.not.include(`${r.id}.refused`);
      expect(falling.to('dlx')).to.deep.equal(['own-dead']);
    });

    it('report confirmed, then a waited refusal past its last wait: a "dead" report retracts it before the reject', async () => {
      const p = new StubPublisher();
      p.plan = ['refuse', 'ok', 'refuse', 'ok'];
      const { loop } = setup(p, [1]);
      const { delivery, ops } = deliveryOn();
      const r = report();
      expect(await loop.run(delivery, routeTo('retry', 'k', { kind: 'wait' }), r)).to.equal('rejected');
      expect(p.published.map((x) => x.id)).to.deep.equal(['retry/k', r.id, 'retry/k', `${r.id}.refused`]);
      expect(ops).to.deep.equal(['reject']);
    });
  });
});
