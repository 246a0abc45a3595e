import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../src/logging/logger.js';
import { WebhookQueue } from '../../src/webhooks/webhook-queue.js';
import { readWebhookInput } from '../../src/webhooks/webhook-subscription.js';
import { waitFor } from '../helpers/wait-for.js';
import { webhookEvent as event, webhookSubscription as subscription } from '../helpers/webhook-fixtures.js';

/** A logger that keeps what was warned, to see why a delivery was given up. */
function recordingLog(): { log: Logger; warned: Array<Record<string, unknown>> } {
  const warned: Array<Record<string, unknown>> = [];
  const none = (): undefined => undefined;
  const log = {
    debug: none,
    info: none,
    error: none,
    warn: (message: string, fields: Record<string, unknown> = {}) => warned.push({ message, ...fields }),
  } as unknown as Logger;
  return { log, warned };
}

describe('where webhooks may be delivered (no internal addresses unless allowed)', function () {
  this.timeout(20_000);
  const got: string[] = [];
  let server: http.Server;
  let port: number;

  before(async () => {
    server = http.createServer((req, res) => {
      got.push(req.url ?? '/');
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('refuses a subscription URL whose host is an internal address or this machine, naming "url", unless allowed', () => {
    const refused = (url: string): string => {
      try {
        readWebhookInput({ url, events: ['*'] }, false);
      } catch (err) {
        return (err as Error).message;
      }
      return `accepted ${url}`;
    };
    for (const url of [
      'http://127.0.0.1:8080/h',
      'http://127.1/h',
      'http://0x7f000001/h',
      'http://2130706433/h',
      'http://0.0.0.0/h',
      'http://10.1.2.3/h',
      'http://172.16.0.1/h',
      'http://172.31.255.255/h',
      'http://192.168.1.1/h',
      'http://100.64.0.1/h',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/h',
      'http://[::]/h',
      'http://[::ffff:127.0.0.1]/h',
      'http://[::ffff:169.254.169.254]/h',
      'http://[fc00::1]/h',
      'http://[fd12:3456::1]/h',
      'http://[fe80::1]/h',
      'http://localhost:9000/h',
      'http://LOCALHOST./h',
      'http://api.localhost/h',
    ])
      expect(refused(url), url).to.contain('"url"').and.not.contain('accepted');
    for (const url of ['https://hooks.example.com/h', 'http://93.184.216.34/h', 'http://172.32.0.1/h', 'http://[2606:4700::1111]/h'])
      expect(readWebhookInput({ url, events: ['*'] }, false).url, url).to.equal(url);
    for (const url of ['http://127.0.0.1:8080/h', 'http://169.254.169.254/', 'http://localhost/h', 'http://[fe80::1]/h'])
      expect(readWebhookInput({ url, events: ['*'] }, false, true).url, url).to.equal(url);
    // An update is checked as a creation is.
    expect(() => readWebhookInput({ url: 'http://10.0.0.1/' }, true)).to.throw('"url"');
  });

  it('gives a delivery up, with the reason logged, when its host is or resolves to an internal address, and sends nothing', async () => {
    const subscriptions = new Map([
      ['literal', subscription('literal', `http://127.0.0.1:${port}/literal`)],
      // Made before this check existed, or a name that resolves to loopback: refused after DNS.
      ['named', subscription('named', `http://localhost:${port}/named`)],
    ]);
    const { log, warned } = recordingLog();
    const queues = ['literal', 'named'].map(
      (id) => new WebhookQueue(id, (known) => subscriptions.get(known), log, { retryDelaysMs: [10, 10, 10], timeoutMs: 5000 }),
    );
    try {
      for (const queue of queues) queue.add(event(1));
      await waitFor('both deliveries given up', () => warned.filter((entry) => entry.message === 'webhook delivery given up').length === 2);
      const reasons = warned.map((entry) => `${entry.subscription as string}: ${entry.reason as string}`).sort();
      expect(reasons[0]).to.match(/^literal: refused destination: 127\.0\.0\.1 is an internal address/);
      expect(reasons[1]).to.match(/^named: refused destination: "localhost" resolves to (127\.0\.0\.1|::1), an internal address/);
      expect(got).to.deep.equal([]);
    } finally {
      for (const queue of queues) queue.close();
    }
  });

  it('delivers to an internal address when the operator allows it', async () => {
    const subscriptions = new Map([['named', subscription('named', `http://localhost:${port}/allowed`)]]);
    const { log } = recordingLog();
    const queue = new WebhookQueue('named', (id) => subscriptions.get(id), log, {
      retryDelaysMs: [],
      allowPrivateAddresses: () => Promise.resolve(true),
    });
    try {
      queue.add(event(1));
      await waitFor('the delivery', () => got.includes('/allowed'));
    } finally {
      queue.close();
    }
  });
});
