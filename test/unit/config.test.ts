import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import { loadConfig } from '../../src/config/load-config.js';
import { queueFor } from '../../src/config/queue-resolver.js';
import { checkMinimums, DEFAULT_TENANT_SHARE, tenantShare } from '../../src/config/tenant-share.js';
import { exitCodeFor } from '../../src/cli/exit-codes.js';
import { ConfigError } from '../../src/errors/errors.js';

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('configuration', () => {
  it('fills every default when the file sets nothing', () => {
    const config = compileConfig({});
    expect(config.prefix).to.equal('ojs');
    expect(config.tenantHeader).to.equal('x-ojs-tenant');
    expect(config.broker).to.deep.equal({
      url: 'amqp://guest:guest@localhost:5672/',
      urls: ['amqp://guest:guest@localhost:5672/'],
      heartbeat: 60,
      stallTimeout: 15,
      reconnect: { initialDelay: 1, maxDelay: 30 },
      management: 'http://guest:guest@localhost:15672/',
      managementUrls: ['http://guest:guest@localhost:15672/'],
    });
    expect(config.security).to.deep.equal({ tenantUsers: false, internalUser: 'ojs.internal', operatorUser: 'guest' });
    expect(config.durable).to.equal(true);
    expect(config.gracePeriod).to.equal(30);
    expect(config.httpPort).to.equal(9400);
    expect(config.defaultQueue.default_retry).to.deep.equal({
      max_attempts: 3,
      initial_interval: 'PT1S',
      backoff_coefficient: 2,
      max_interval: 'PT5M',
      jitter: true,
      non_retryable_errors: [],
      on_exhaustion: 'dead_letter',
      initialIntervalMs: 1000,
      maxIntervalMs: 300_000,
    });
  });

  it('layers system defaults, then _default, then the queue, field by field in default_retry', () => {
    const config = compileConfig({
      queues: {
        _default: { default_retry: { max_attempts: 5, initial_interval: 'PT2S' }, default_timeout: 30 },
        conversions: { default_retry: { max_attempts: 7 } },
      },
    });
    const queue = config.queues.get('conversions');
    expect(queue?.default_retry.max_attempts).to.equal(7);
    expect(queue?.default_retry.initial_interval).to.equal('PT2S');
    expect(queue?.default_retry.backoff_coefficient).to.equal(2);
    expect(queue?.default_timeout).to.equal(30);
    expect(queue?.scope).to.equal('tenant');
  });

  it('creates an unconfigured queue implicitly from _default, and refuses it with strict_queues', () => {
    const lax = compileConfig({ queues: { _default: { scope: 'shared' } } });
    expect(queueFor(lax, 'anything')).to.include({ name: 'anything', scope: 'shared', configured: false });
    const strict = compileConfig({ strict_queues: true }, '/etc/p.json');
    const err = configError(() => queueFor(strict, 'anything'));
    expect(err.file).to.equal('/etc/p.json');
    expect(err.key).to.equal('queues.anything');
  });

  it('names the file, the key and what was expected for a wrong type', () => {
    const err = configError(() => compileConfig({ stages: { conv: { module: 'x.js', concurrency: 'eight' } } }, '/srv/pipeline.json'));
    expect(err.message).to.equal('/srv/pipeline.json: stages.conv.concurrency: must be integer');
  });

  it('names an unknown key', () => {
    const err = configError(() => compileConfig({ queues: { conversions: { scope: 'tenant', maxSize: 3 } } }, 'p.json'));
    expect(err.key).to.equal('queues.conversions.maxSize');
    expect(err.expected).to.contain('unknown');
  });

  it('rejects an invalid tenant slug and an unknown enum value', () => {
    expect(configError(() => compileConfig({ tenants: ['Acme Corp'] })).key).to.equal('tenants.0');
    const err = configError(() => compileConfig({ queues: { q: { scope: 'global' } } }));
    expect(err.key).to.equal('queues.q.scope');
    expect(err.expected).to.equal('one of "tenant", "shared"');
  });

  describe('tenant weight and max_concurrency', () => {
    it('defaults a slug and an object without them to weight 1, unlimited', () => {
      const config = compileConfig({ tenants: ['acme', { name: 'globex' }, { name: 'initech', queues: {} }] });
      for (const tenant of ['acme', 'globex', 'initech']) {
        expect(config.tenantShares.get(tenant), tenant).to.deep.equal({ weight: 1, maxConcurrency: undefined, minConcurrency: 0 });
      }
      expect(DEFAULT_TENANT_SHARE).to.deep.equal({ weight: 1, maxConcurrency: undefined, minConcurrency: 0 });
    });

    it('compiles weight and max_concurrency per tenant, next to its queue settings', () => {
      const config = compileConfig({
        tenants: [
          'acme',
          { name: 'globex', weight: 2.5, max_concurrency: 8, queues: { _default: { max_size: 10 } } },
          { name: 'hooli', weight: 3 },
        ],
      });
      expect(config.tenants).to.deep.equal(['acme', 'globex', 'hooli']);
      expect(tenantShare(config, 'globex')).to.deep.equal({ weight: 2.5, maxConcurrency: 8, minConcurrency: 0 });
      expect(tenantShare(config, 'hooli')).to.deep.equal({ weight: 3, maxConcurrency: undefined, minConcurrency: 0 });
      expect(tenantShare(config, 'acme')).to.deep.equal({ weight: 1, maxConcurrency: undefined, minConcurrency: 0 });
      // A tenant provisioned but not configured (provision --tenant, --all-tenants) gets the default.
      expect(tenantShare(config, 'umbrella')).to.deep.equal({ weight: 1, maxConcurrency: undefined, minConcurrency: 0 });
      expect(config.queueSettings.tenants.get('globex')?.get('_default')).to.deep.equal({ max_size: 10 });
    });

    for (const [field, value, expected] of [
      ['weight', 0, 'must be > 0'],
      ['weight', -1, 'must be > 0'],
      ['weight', 'heavy', 'must be number'],
      ['max_concurrency', 0, 'must be >= 1'],
      ['max_concurrency', 2.5, 'must be integer'],
      ['max_concurrency', '8', 'must be integer'],
      ['min_concurrency', -1, 'must be >= 0'],
      ['min_concurrency', 1.5, 'must be integer'],
    ] as const) {
      it(`refuses ${field} ${JSON.stringify(value)}, naming the key (exit 2)`, () => {
        const err = configError(() => compileConfig({ tenants: ['acme', { name: 'globex', [field]: value }] }, '/srv/pipeline.json'));
        expect(err.key).to.equal(`tenants.1.${field}`);
        expect(err.message).to.equal(`/srv/pipeline.json: tenants.1.${field}: ${expected}`);
        expect(exitCodeFor(err)).to.equal(2);
      });
    }

    it("compiles min_concurrency, and refuses one above the tenant's own max_concurrency, naming the key", () => {
      const config = compileConfig({ tenants: [{ name: 'acme', min_concurrency: 3, max_concurrency: 3 }] });
      expect(tenantShare(config, 'acme')).to.deep.equal({ weight: 1, maxConcurrency: 3, minConcurrency: 3 });
      const err = configError(() =>
        compileConfig({ tenants: ['a', { name: 'acme', min_concurrency: 4, max_concurrency: 3 }] }, '/srv/p.json'),
      );
      expect(err.message).to.equal("/srv/p.json: tenants.1.min_concurrency: at most the tenant's max_concurrency (3), got 4");
      expect(exitCodeFor(err)).to.equal(2);
    });

    it("refuses a pooled process whose tenants' minimums add up to more than the stage's concurrency, naming the stage's key", () => {
      const config = compileConfig(
        { tenants: [{ name: 'acme', min_concurrency: 3 }, { name: 'globex', min_concurrency: 2 }, 'hooli'] },
        '/srv/p.json',
      );
      const stage = { name: 'converter', concurrency: 4 };
      checkMinimums(config, stage, ['acme', 'hooli', 'umbrella']);
      checkMinimums(config, { ...stage, concurrency: 5 }, config.tenants);
      const err = configError(() => checkMinimums(config, stage, config.tenants));
      expect(err.key).to.equal('stages.converter.concurrency');
      expect(err.message).to.equal(
        '/srv/p.json: stages.converter.concurrency: at least 5, the sum of the min_concurrency of the tenants a pooled process of it serves (acme: 3, globex: 2); got 4',
      );
    });

    it('refuses an unknown key in a tenant object', () => {
      expect(configError(() => compileConfig({ tenants: [{ name: 'acme', weigth: 2 }] as never })).key).to.equal('tenants.0.weigth');
    });
  });

  it('rejects variants on a shared queue and overlapping variant values', () => {
    expect(
      configError(() => compileConfig({ queues: { q: { scope: 'shared', variants: { by: 'mime', values: { pdf: ['a'] } } } } })).key,
    ).to.equal('queues.q.variants');
    const err = configError(() => compileConfig({ queues: { q: { variants: { by: 'mime', values: { a: ['x'], b: ['x'] } } } } }));
    expect(err.key).to.equal('queues.q.variants.values.b');
  });

  it('takes security settings, and refuses an internal user that is the operator', () => {
    const config = compileConfig({ prefix: 'p', security: { tenantUsers: true, internalUser: 'svc', operatorUser: 'root' } });
    expect(config.security).to.deep.equal({ tenantUsers: true, internalUser: 'svc', operatorUser: 'root' });
    expect(configError(() => compileConfig({ security: { internalUser: 'guest' } })).key).to.equal('security.internalUser');
    expect(configError(() => compileConfig({ security: { tenantUsers: 'yes' } })).key).to.equal('security.tenantUsers');
    expect(configError(() => compileConfig({ broker: { management: 'ftp://x/' } })).key).to.equal('broker.management');
  });

  it('refuses a number JSON cannot hold (1e400 parses as Infinity), naming the key, wherever it is', () => {
    const huge = JSON.parse('1e400') as number;
    for (const [raw, key] of [
      [{ queues: { q: { max_size: huge } } }, 'queues.q.max_size'],
      [{ queues: { _default: { dead_letter_max_size: huge } } }, 'queues._default.dead_letter_max_size'],
      [{ tenants: [{ name: 'acme', queues: { q: { max_size_bytes: huge } } }] }, 'tenants.0.queues.q.max_size_bytes'],
      [{ queues: { q: { default_timeout: huge } } }, 'queues.q.default_timeout'],
      [{ gracePeriod: -huge }, 'gracePeriod'],
      [{ queues: { q: { default_retry: { backoff_coefficient: Number.NaN } } } }, 'queues.q.default_retry.backoff_coefficient'],
    ] as const) {
      const err = configError(() => compileConfig(raw));
      expect(err.key, JSON.stringify(raw)).to.equal(key);
      expect(err.expected).to.contain('a finite number');
    }
    // The schema itself bounds the sizes, for editors and other validators.
    expect(configError(() => compileConfig({ queues: { q: { max_size: 2 ** 53 } } })).key).to.equal('queues.q.max_size');
    expect(compileConfig({ queues: { q: { max_size: 2 ** 53 - 1 } } }).queues.get('q')?.max_size).to.equal(2 ** 53 - 1);
  });

  it('rejects a duration that is not ISO 8601', () => {
    const err = configError(() => compileConfig({ queues: { _default: { default_retry: { initial_interval: '5s' } } } }));
    expect(err.key).to.equal('queues._default.default_retry.initial_interval');
  });

  it('resolves stage modules relative to the configuration file, and prefetch from concurrency', () => {
    const config = compileConfig({ stages: { conv: { module: '../stages/conv.js', concurrency: 8 } } }, '/srv/app/config/p.json');
    expect(config.stages.get('conv')).to.deep.equal({
      name: 'conv',
      module: '/srv/app/stages/conv.js',
      concurrency: 8,
      prefetch: 18,
      tenantPrefetch: 18,
      options: {},
      threads: undefined,
      limits: [],
    });
  });

  it('takes tenant_prefetch as written, else prefetch', () => {
    const stages = compileConfig({
      stages: {
        small: { module: 'a.js', concurrency: 8, prefetch: 4 },
        set: { module: 'b.js', concurrency: 8, tenant_prefetch: 3 },
      },
    }).stages;
    expect(stages.get('small')?.tenantPrefetch).to.equal(4);
    expect(stages.get('set')?.tenantPrefetch).to.equal(3);
  });

  describe('loadConfig', () => {
    let dir: string;
    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-config-'));
    });

    it('lets AMQP_URL and STAGECOACH_PREFIX override the file', async () => {
      const file = path.join(dir, 'ok.json');
      await writeFile(file, JSON.stringify({ prefix: 'file', broker: { url: 'amqp://file/' } }));
      const config = await loadConfig(file, { AMQP_URL: 'amqp://env:5672/', STAGECOACH_PREFIX: 'env' });
      expect(config.broker.url).to.equal('amqp://env:5672/');
      expect(config.prefix).to.equal('env');
      expect(config.source).to.equal(file);
    });

    it('lets STAGECOACH_MANAGEMENT_URL override broker.management, and derives the operator from it', async () => {
      const file = path.join(dir, 'management.json');
      await writeFile(file, JSON.stringify({ prefix: 'p', broker: { management: 'http://file:secret@host:15672/' } }));
      const fromFile = await loadConfig(file, {});
      expect(fromFile.broker.management).to.equal('http://file:secret@host:15672/');
      expect(fromFile.security.operatorUser).to.equal('file');
      const fromEnv = await loadConfig(file, { STAGECOACH_MANAGEMENT_URL: 'http://admin:pw@other:15672/' });
      expect(fromEnv.broker.management).to.equal('http://admin:pw@other:15672/');
      expect(fromEnv.security).to.deep.equal({ tenantUsers: false, internalUser: 'p.internal', operatorUser: 'admin' });
    });

    it('reads STAGECOACH_CONFIG when no path is given', async () => {
      const file = path.join(dir, 'env.json');
      await writeFile(file, JSON.stringify({ prefix: 'fromenv' }));
      expect((await loadConfig(undefined, { STAGECOACH_CONFIG: file })).prefix).to.equal('fromenv');
    });

    it('names the file for invalid JSON and for a missing file', async () => {
      const file = path.join(dir, 'bad.json');
      await writeFile(file, '{ "prefix": ');
      const bad = await loadConfig(file, {}).catch((err: unknown) => err);
      expect(bad).to.be.instanceOf(ConfigError);
      expect((bad as ConfigError).message)
        .to.contain(file)
        .and.contain('valid JSON');
      const missing = await loadConfig(path.join(dir, 'nope.json'), {}).catch((err: unknown) => err);
      expect((missing as ConfigError).message)
        .to.contain('nope.json')
        .and.contain('readable file');
    });
  });
});
