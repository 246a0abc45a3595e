import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../../src/logging/logger.js';
import { WebhookQueue } from '../../src/webhooks/webhook-queue.js';
import type { OjsEvent } from '../../src/events/ojs-event.js';
import { readWebhookInput } from '../../src/webhooks/webhook-subscription.js';
import { waitFor } from '../helpers/wait-for.js';
import { webhookEvent as event, webhookSubscription as subscription } from '../helpers/webhook-fixtures.js';

const log = createLogger({ test: 'webhook-queue' }, 'error');
/** The endpoint listens on 127.0.0.1: an internal address, delivered to only when allowed. */
const allowPrivateAddresses = (): Promise<boolean> => Promise.resolve(true);

describe('webhook deliveries (WebhookQueue)', function () {
  this.timeout(20_000);
  const held: http.ServerResponse[] = [];
  const got: Record<string, string[]> = {};
  let server: http.Server;
  let base: string;

  before(async () => {
    // `/hang` never answers (until the end); `/gone` answers 410; anything else 200.
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = req.url ?? '/';
        (got[path] ??= []).push((JSON.parse(Buffer.concat(chunks).toString('utf8')) as OjsEvent).id);
        if (path === '/hang') held.push(res);
        else res.writeHead(path === '/gone' ? 410 : 200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    for (const res of held) res.end();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("holds at most maxPending deliveries behind an endpoint that does not answer, and never holds back another subscription's", async () => {
    const subscriptions = new Map([
      ['hang', subscription('hang', `${base}/hang`)],
      ['fine', subscription('fine', `${base}/fine`)],
    ]);
    const stuck = new WebhookQueue('hang', (id) => subscriptions.get(id), log, {
      maxPending: 3,
      timeoutMs: 60_000,
      retryDelaysMs: [],
      allowPrivateAddresses,
    });
    const fine = new WebhookQueue('fine', (id) => subscriptions.get(id), log, {
      timeoutMs: 60_000,
      retryDelaysMs: [],
      allowPrivateAddresses,
    });
    try {
      for (let n = 0; n < 10; n++) stuck.add(event(n));
      await waitFor('the first delivery in flight', () => got['/hang']?.length === 1);
      expect(stuck.size).to.equal(3);
      for (let n = 0; n < 5; n++) fine.add(event(n));
      await waitFor("the other subscription's five deliveries", () => got['/fine']?.length === 5);
      expect(got['/hang']).to.deep.equal(['evt-0']);
    } finally {
      stuck.close();
      fine.close();
    }
  });

  it('gives up on a 4xx at once, and sends nothing for a subscription deleted meanwhile', async () => {
    const subscriptions = new Map([['gone', subscription('gone', `${base}/gone`)]]);
    const queue = new WebhookQueue('gone', (id) => subscriptions.get(id), log, { retryDelaysMs: [10, 10, 10], allowPrivateAddresses });
    try {
      queue.add(event(1));
      await waitFor('the 410', () => got['/gone']?.length === 1);
      await waitFor('nothing left to retry', () => queue.size === 0);
      subscriptions.delete('gone');
      queue.add(event(2));
      await waitFor('the queue emptied', () => queue.size === 0);
      // One more event through a live queue to be sure the deleted one's would have been sent by now.
      subscriptions.set('gone', subscription('gone', `${base}/gone`));
      queue.add(event(3));
      await waitFor('the third event', () => got['/gone']?.includes('evt-3'));
      expect(got['/gone']).to.deep.equal(['evt-1', 'evt-3']);
    } finally {
      queue.close();
    }
  });

  it('reads a subscription body: http(s) URLs only, event types, each refusal naming its field', () => {
    expect(readWebhookInput({ url: 'https://x.example/h', events: ['job.*', '*', 'job.completed'] }, false)).to.deep.equal({
      url: 'https://x.example/h',
      events: ['job.*', '*', 'job.completed'],
    });
    const refused = (body: unknown, partial = false): string => {
      try {
        readWebhookInput(body, partial);
      } catch (err) {
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({ url: 'javascript:alert(1)', events: ['*'] })).to.contain('"url"');
    expect(refused({ url: 'not a url', events: ['*'] })).to.contain('"url"');
    expect(refused({ url: 'https://user:pw@x.example/h', events: ['*'] })).to.contain('"url"');
    expect(refused({ events: ['*'] })).to.contain('"url"');
    expect(refused({ url: 'http://x.example', events: ['Job Completed'] })).to.contain('"events"');
    expect(refused({ url: 'http://x.example', events: ['*'], secret: 'short' })).to.contain('"secret"');
    expect(refused({ url: 'http://x.example', events: ['*'], filter: { queues: 'scans' } })).to.contain('"filter.queues"');
    expect(refused({ active: 'yes' }, true)).to.contain('"active"');
    expect(readWebhookInput({ active: false }, true)).to.deep.equal({ active: false });
    expect(readWebhookInput({ filter: null }, true)).to.deep.equal({ filter: {} });
  });
});
