import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { compileConfig, SCHEMA_PATH } from '../../src/config/compile-config.js';
import { loadConfig } from '../../src/config/load-config.js';
import { MAX_PAYLOAD_THRESHOLD } from '../../src/config/defaults.js';
import { queueFor } from '../../src/config/queue-resolver.js';
import { ConfigError } from '../../src/errors/errors.js';
import { createPayloadStore } from '../../src/payload/create-payload-store.js';
import { FsPayloadStore } from '../../src/payload/fs-payload-store.js';
import { PAYLOAD_TABLE_NAME, PostgresPayloadStore } from '../../src/payload/postgres-payload-store.js';

/** The ConfigError `raw` compiles to: its key and what was expected. */
function configError(raw: unknown): { key: string; expected: string } {
  try {
    compileConfig(raw, '/etc/stagecoach.json');
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    const { key, expected } = err as ConfigError;
    return { key, expected };
  }
  throw new Error('expected a ConfigError');
}

describe('payloads configuration', () => {
  it('defaults to 1 MiB, the filesystem store in ./payloads next to the file, orphans after an hour, retention 50 days', () => {
    const config = compileConfig({}, '/etc/stagecoach/pipeline.json');
    expect(config.payloads).to.deep.equal({
      threshold: 1048576,
      store: { kind: 'fs', dir: '/etc/stagecoach/payloads' },
      orphanAfterSeconds: 3600,
      retentionSeconds: 50 * 86400,
    });
    expect(config.defaultQueue.payload_threshold).to.equal(1048576);
    expect(queueFor(config, 'implicit').payload_threshold).to.equal(1048576);
  });

  it('resolves an inline configuration`s directory against the working directory, and keeps an absolute one', () => {
    expect(compileConfig({}).payloads.store).to.deep.equal({ kind: 'fs', dir: path.resolve('payloads') });
    expect(compileConfig({ payloads: { store: { kind: 'fs', dir: '/data/payloads' } } }, '/etc/s.json').payloads.store).to.deep.equal({
      kind: 'fs',
      dir: '/data/payloads',
    });
    expect(compileConfig({ payloads: { store: { kind: 'fs' } } }, '/etc/s.json').payloads.store).to.deep.equal({
      kind: 'fs',
      dir: '/etc/payloads',
    });
  });

  it('takes a PostgreSQL store, with the default table and pool size unless they are given', () => {
    const url = 'postgres://stagecoach@db:5432/pipeline';
    expect(compileConfig({ payloads: { store: { kind: 'postgres', url } } }).payloads.store).to.deep.equal({
      kind: 'postgres',
      url,
      table: 'stagecoach_payloads',
      pool_size: 4,
    });
    expect(compileConfig({ payloads: { store: { kind: 'postgres', url, table: 'payloads', pool_size: 16 } } }).payloads.store).to.include({
      table: 'payloads',
      pool_size: 16,
    });
  });

  it('compiles durations to whole seconds', () => {
    const config = compileConfig({ payloads: { threshold: 0, orphan_after: 'PT10M', retention: 'P31DT12H' } });
    expect(config.payloads).to.include({ threshold: 0, orphanAfterSeconds: 600, retentionSeconds: 31.5 * 86400 });
  });

  it('layers queues.<name>.payload_threshold: the queue, then _default, then payloads.threshold', () => {
    const config = compileConfig({
      payloads: { threshold: 500_000 },
      queues: {
        _default: { payload_threshold: 200_000 },
        documents: { payload_threshold: 4 * 1024 * 1024 },
        'scan-specs': { scope: 'shared' },
      },
    });
    expect(config.queues.get('documents')?.payload_threshold).to.equal(4 * 1024 * 1024);
    expect(config.queues.get('scan-specs')?.payload_threshold).to.equal(200_000);
    expect(queueFor(config, 'implicit').payload_threshold).to.equal(200_000);
    const plain = compileConfig({ payloads: { threshold: 500_000 }, queues: { documents: {} } });
    expect(plain.queues.get('documents')?.payload_threshold).to.equal(500_000);
  });

  it('refuses a threshold above 8 MiB or below zero, naming the key', () => {
    expect(configError({ payloads: { threshold: 8 * 1024 * 1024 + 1 } })).to.deep.equal({
      key: 'payloads.threshold',
      expected: 'must be <= 8388608',
    });
    expect(configError({ payloads: { threshold: -1 } }).key).to.equal('payloads.threshold');
    expect(configError({ payloads: { threshold: 1.5 } }).key).to.equal('payloads.threshold');
    expect(configError({ queues: { documents: { payload_threshold: 16 * 1024 * 1024 } } }).key).to.equal(
      'queues.documents.payload_threshold',
    );
    expect(configError({ queues: { _default: { payload_threshold: '1MB' } } }).key).to.equal('queues._default.payload_threshold');
  });

  it('refuses a store that is not fs or postgres, or that mixes their keys, naming the key', () => {
    expect(configError({ payloads: { store: { kind: 's3' } } })).to.deep.equal({
      key: 'payloads.store.kind',
      expected: 'one of "fs", "postgres"',
    });
    expect(configError({ payloads: { store: { dir: '/data' } } })).to.deep.equal({
      key: 'payloads.store.kind',
      expected: 'a value (required)',
    });
    expect(configError({ payloads: { store: { kind: 'postgres' } } })).to.deep.equal({
      key: 'payloads.store.url',
      expected: 'a value (required)',
    });
    expect(configError({ payloads: { store: { kind: 'postgres', url: 'postgres://db/x', dir: '/data' } } }).key).to.equal(
      'payloads.store.dir',
    );
    expect(configError({ payloads: { store: { kind: 'fs', url: 'postgres://db/x' } } }).key).to.equal('payloads.store.url');
    expect(configError({ payloads: { store: { kind: 'fs', dir: '' } } }).key).to.equal('payloads.store.dir');
    expect(configError({ payloads: { store: { kind: 'postgres', url: 'mysql://db/x' } } }).key).to.equal('payloads.store.url');
    expect(configError({ payloads: { store: { kind: 'postgres', url: 'postgres://db/x', table: 'x; DROP TABLE y' } } }).key).to.equal(
      'payloads.store.table',
    );
    for (const pool_size of [0, 101, 2.5]) {
      expect(configError({ payloads: { store: { kind: 'postgres', url: 'postgres://db/x', pool_size } } }).key).to.equal(
        'payloads.store.pool_size',
      );
    }
    expect(configError({ payloads: { store: { kind: 'fs', pool_size: 4 } } }).key).to.equal('payloads.store.pool_size');
    expect(configError({ payloads: { bucket: 'x' } })).to.deep.equal({ key: 'payloads.bucket', expected: 'no such key (unknown setting)' });
  });

  it('refuses durations that are not ISO 8601 or under a second', () => {
    expect(configError({ payloads: { orphan_after: '1h' } }).key).to.equal('payloads.orphan_after');
    expect(configError({ payloads: { orphan_after: 'PT0.5S' } })).to.deep.equal({
      key: 'payloads.orphan_after',
      expected: 'an ISO 8601 duration of at least one second, such as "PT1H" (got "PT0.5S")',
    });
    expect(configError({ payloads: { retention: 'forever' } }).key).to.equal('payloads.retention');
  });

  it('refuses a retention that a dead letter or an orphan delay outlasts, naming what it must outlast', () => {
    expect(configError({ payloads: { retention: 'PT30M' } })).to.deep.equal({
      key: 'payloads.retention',
      expected: 'a duration longer than payloads.orphan_after ("PT1H"), got "PT30M"',
    });
    // Dead letters are kept P30D unless configured otherwise.
    const system = configError({ payloads: { retention: 'P30D' } });
    expect(system.key).to.equal('payloads.retention');
    expect(system.expected).to.contain('the default dead_letter_ttl keeps dead letters "P30D"');
    expect(configError({ payloads: { retention: 'P40D' }, queues: { documents: { dead_letter_ttl: 'P45D' } } }).expected).to.contain(
      'queues.documents.dead_letter_ttl keeps dead letters "P45D"',
    );
    expect(
      configError({
        payloads: { retention: 'P40D' },
        tenants: ['acme', { name: 'globex', queues: { _default: { dead_letter_ttl: 'P41D' } } }],
      }).expected,
    ).to.contain('tenants.1.queues._default.dead_letter_ttl keeps dead letters "P41D"');
    // Shorter dead-letter TTLs (or none kept past purging) let a shorter retention through.
    const short = compileConfig({
      payloads: { retention: 'P8D' },
      queues: { _default: { dead_letter_ttl: 'P7D' }, other: { dead_letter_ttl: null } },
    });
    expect(short.payloads.retentionSeconds).to.equal(8 * 86400);
  });

  it('keeps the schema`s table pattern and threshold bound equal to the code`s', async () => {
    const schema = JSON.parse(await readFile(SCHEMA_PATH, 'utf8')) as {
      properties: { payloads: { properties: { store: { then: { properties: { table: { pattern: string } } } } } } };
      definitions: { payloadThreshold: { maximum: number } };
    };
    expect(schema.properties.payloads.properties.store.then.properties.table.pattern).to.equal(PAYLOAD_TABLE_NAME.source);
    expect(schema.definitions.payloadThreshold.maximum).to.equal(MAX_PAYLOAD_THRESHOLD);
  });

  it('builds the store the configuration names, touching nothing until it is used', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-payload-config-'));
    try {
      const file = path.join(dir, 'stagecoach.json');
      await writeFile(file, JSON.stringify({ payloads: { store: { kind: 'fs', dir: 'shared/payloads' } } }));
      const store = createPayloadStore(await loadConfig(file, {}));
      expect(store).to.be.instanceOf(FsPayloadStore);
      expect((store as FsPayloadStore).dir).to.equal(path.join(dir, 'shared/payloads'));
      await store.close();
      const postgres = createPayloadStore({ kind: 'postgres', url: 'postgres://nobody@127.0.0.1:1/none', table: 'payloads', pool_size: 7 });
      expect(postgres).to.be.instanceOf(PostgresPayloadStore);
      expect(postgres).to.include({ table: 'payloads', poolSize: 7 });
      await postgres.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
