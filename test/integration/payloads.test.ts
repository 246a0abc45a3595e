import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { retryDeadLetters } from '../../src/dead-letters/dead-letter-actions.js';
import { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { createJob } from '../../src/job/envelope.js';
import { OJS_HEADERS, toWire } from '../../src/job/amqp-mapping.js';
import { createLogger } from '../../src/logging/logger.js';
import { createPayloadStore } from '../../src/payload/create-payload-store.js';
import type { PayloadStore } from '../../src/payload/payload-store.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { digestOf, seen } from '../fixtures/payload-stages.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';
import pg from 'pg';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'payloads' }, 'error');
const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const THRESHOLD = 16 * 1024;

/** Every message body any confirm channel of this process published, by size: the broker saw no more. */
const largest = { bytes: 0 };
const original = ConfirmPublisher.prototype.publish;

function rawConfig(store: RawConfig['payloads'] extends infer P ? (P extends { store?: infer S } ? S : never) : never): RawConfig {
  return {
    tenants: ['acme', 'globex'],
    queues: {
      docs: { default_retry: { max_attempts: 3, initial_interval: 'PT1S' } },
      copies: {},
    },
    stages: { reader: { module: './payload-stages.js', concurrency: 2 }, copier: { module: './payload-stages.js' } },
    payloads: { threshold: THRESHOLD, store },
  } as RawConfig;
}

for (const kind of ['fs', 'postgres'] as const) {
  describe(`payload offloading (${kind} store, against the broker)`, function () {
    this.timeout(60_000);
    let dir: string;
    let table: string;
    let config: CompiledConfig;
    let running: RunningGroup;
    let store: PayloadStore;

    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-payloads-'));
      table = `payloads_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
      config = withTestConfig(
        rawConfig(kind === 'fs' ? { kind: 'fs', dir } : { kind: 'postgres', url: POSTGRES_URL, table }),
        path.join(here, '../fixtures/config.json'),
      );
      store = createPayloadStore(config);
      ConfirmPublisher.prototype.publish = function (exchange, routingKey, content, options) {
        largest.bytes = Math.max(largest.bytes, content.length);
        return original.call(this, exchange, routingKey, content, options);
      };
      running = await startGroup(
        config,
        [
          { stage: 'reader', tenant: 'acme' },
          { stage: 'reader', tenant: 'globex' },
          { stage: 'copier', tenant: 'acme' },
        ],
        log,
      );
    });

    after(async () => {
      ConfirmPublisher.prototype.publish = original;
      await running?.stop();
      await store?.close();
      await rm(dir, { recursive: true, force: true });
      if (kind === 'postgres') {
        const client = new pg.Client({ connectionString: POSTGRES_URL });
        await client.connect();
        await client.query(`DROP TABLE IF EXISTS ${table}`);
        await client.end();
      }
    });

    const document = (n: number): string => `${'lorem ipsum '.repeat(Math.ceil(n / 12))}`.slice(0, n);
    const deadQueue = (tenant: string): string => running.names.deadQueue('docs', tenant);

    it('sends a large job by reference, hands the stage its arguments whole, and deletes the payload once it completed', async () => {
      largest.bytes = 0;
      const args = ['copy', document(200_000), { pages: 3, store: kind }];
      const id = await running.publisher.publish('docs', { type: 'doc', args, tenant: 'acme' });
      // The reader got it whole, and emitted it on (by reference again) to the copier.
      await waitFor('the copy', () => [...seen.entries()].some(([job, runs]) => job !== id && runs[0].digest === digestOf(args)));
      expect(seen.get(id)?.map((run) => run.digest)).to.deep.equal([digestOf(args)]);
      expect(largest.bytes, 'the largest message any publisher sent').to.be.at.most(THRESHOLD);
      await waitFor('both payloads deleted', async () => (await store.count()) === 0);
    });

    it('keeps the payload through a retry and a dead letter; dead retry brings it back whole', async () => {
      const retried = ['fail-once', document(100_000)];
      const once = await running.publisher.publish('docs', { type: 'doc', args: retried, tenant: 'acme' });
      await waitFor('the second attempt', () => seen.get(once)?.length === 2, 20_000);
      expect(seen.get(once)?.map((run) => [run.attempt, run.digest])).to.deep.equal([
        [1, digestOf(retried)],
        [2, digestOf(retried)],
      ]);
      await waitFor('its payload deleted', async () => (await store.count('acme')) === 0);

      const refused = ['dead', document(100_000)];
      const dead = await running.publisher.publish('docs', { type: 'doc', args: refused, tenant: 'acme' });
      await waitFor('the dead letter', async () => (await running.raw.count(deadQueue('acme'))) === 1);
      expect(await store.count('acme'), 'kept while dead-lettered').to.equal(1);
      expect(await retryDeadLetters(config, 'docs', 'acme', log)).to.include({ retried: 1 });
      await waitFor('the revived run', () => seen.get(dead)?.length === 2);
      expect(seen.get(dead)?.map((run) => run.digest)).to.deep.equal([digestOf(refused), digestOf(refused)]);
      await waitFor('dead again', async () => (await running.raw.count(deadQueue('acme'))) === 1);
      expect(await store.count('acme')).to.equal(1);
      const [letter] = await running.raw.drain(deadQueue('acme'));
      expect(letter.properties.headers?.[OJS_HEADERS.payloadRef]).to.match(/^acme\//);
      expect(letter.content.length).to.be.lessThan(THRESHOLD);
    });

    it('dead-letters a job whose payload is gone as PAYLOAD_MISSING, without running or retrying it', async () => {
      const job = createJob({ type: 'doc', args: [] }, { queue: 'docs', tenant: 'acme' });
      const wire = toWire(job, { tenantHeader: config.tenantHeader, headers: { [OJS_HEADERS.payloadRef]: `acme/${randomUUID()}` } });
      await running.raw.publish(running.names.tenantExchange('acme'), 'docs', wire.content, wire.options);
      const [letter] = await waitFor('the dead letter', async () => {
        const letters = await running.raw.drain(deadQueue('acme'));
        return letters.length > 0 ? letters : undefined;
      });
      expect(letter.properties.messageId).to.equal(job.id);
      expect(letter.properties.headers).to.include({ [OJS_HEADERS.errorType]: 'PAYLOAD_MISSING', [OJS_HEADERS.attempt]: 1 });
      expect(seen.has(job.id)).to.equal(false);
    });

    it("refuses a stage of another tenant the payload: globex's job naming acme's payload is dead-lettered unread", async () => {
      const key = { tenant: 'acme', id: randomUUID() };
      await store.put(key, Buffer.from(JSON.stringify(['secret of acme'])));
      await store.commit(key);
      const job = createJob({ type: 'doc', args: [] }, { queue: 'docs', tenant: 'globex' });
      const wire = toWire(job, { tenantHeader: config.tenantHeader, headers: { [OJS_HEADERS.payloadRef]: `acme/${key.id}` } });
      await running.raw.publish(running.names.tenantExchange('globex'), 'docs', wire.content, wire.options);
      const [letter] = await waitFor('the dead letter', async () => {
        const letters = await running.raw.drain(deadQueue('globex'));
        return letters.length > 0 ? letters : undefined;
      });
      expect(letter.properties.headers?.[OJS_HEADERS.errorType]).to.equal('INVALID_PAYLOAD');
      expect(String(letter.properties.headers?.[OJS_HEADERS.errorMessage])).to.match(/tenant "acme"/);
      expect(seen.has(job.id)).to.equal(false);
      expect((await store.get(key))?.toString()).to.equal('["secret of acme"]');
      await store.delete(key);
    });
  });
}
