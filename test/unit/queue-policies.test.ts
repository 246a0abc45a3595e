import { expect } from 'chai';
import { compileConfig } from '../../src/config/compile-config.js';
import { ConfigError } from '../../src/errors/errors.js';
import { settingsFor } from '../../src/config/queue-resolver.js';
import { SYSTEM_QUEUE_SETTINGS } from '../../src/config/queue-setting-declarations.js';
import {
  queuePolicies,
  QUEUE_POLICY_PRIORITY,
  TENANT_POLICY_PRIORITY,
  VERSION_POLICY_PRIORITY,
} from '../../src/topology/queue-policies.js';
import type { PolicySpec } from '../../src/topology/topology.types.js';

const config = compileConfig({
  tenants: [
    'acme',
    // globex: its own bound on conversions, and dead letters kept until purged for all its queues.
    { name: 'globex', queues: { conversions: { max_size: 10 }, _default: { dead_letter_ttl: null } } },
    // initech: settings equal to everyone's need no policy of their own.
    { name: 'initech', queues: { conversions: { max_size: 100 } } },
    // hooli: dead letters unbounded in every way: no dead-letter policy may match its queues.
    { name: 'hooli', queues: { _default: { dead_letter_ttl: null, dead_letter_max_size: null } } },
  ],
  queues: {
    _default: { dead_letter_max_size: 500 },
    conversions: { max_size: 100, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
    'scan-specs': { scope: 'shared', max_size_bytes: 1_000_000, overflow_policy: 'drop_oldest', dead_letter_ttl: 'P7D' },
    unbounded: {},
  },
});

function named(policies: PolicySpec[], name: string): PolicySpec {
  const policy = policies.find((p) => p.name === name);
  if (!policy) throw new Error(`no policy ${name} among ${policies.map((p) => p.name).join(', ')}`);
  return policy;
}

/** Which of `names` the policy's pattern matches (JavaScript regular expressions read these patterns as PCRE does). */
function matches(policy: PolicySpec, names: string[]): string[] {
  const pattern = new RegExp(policy.pattern);
  return names.filter((name) => pattern.test(name));
}

const candidates = [
  'ojs.queue.conversions.acme',
  'ojs.queue.conversions.acme.pdf',
  'ojs.queue.conversions.globex',
  'ojs.queue.conversions.globex.pdf',
  'ojs.queue.conversions.globex2',
  'ojs.queue.conversions.initech',
  'ojs.due.conversions.acme',
  'ojs.suspect.conversions.acme.pdf',
  'ojs.dead.conversions.acme',
  'ojs.dead.conversions.globex',
  'ojs.dead.conversions.hooli',
  'ojs.queue.conversions2.acme',
  'ojs.queue.conversions',
  'ojsx.queue.conversions.acme',
  'xojs.queue.conversions.acme',
  'ojs.queue.scan-specs',
  'ojs.dead.scan-specs',
  'ojs.due.scan-specs',
];

describe('queue settings as policies', () => {
  const policies = queuePolicies(config, [{ name: 'explorer', input: 'scan-specs', outputs: ['conversions', 'implicit'] }]);

  it('sets a tenant-scoped queue bound on every tenant main and variant queue, never on due, suspect or dead queues, nor another prefix', () => {
    const work = named(policies, 'ojs.queue.conversions');
    expect(work).to.deep.include({
      applyTo: 'queues',
      priority: QUEUE_POLICY_PRIORITY,
      definition: { 'max-length': 100, overflow: 'reject-publish', 'queue-version': 2 },
    });
    expect(matches(work, candidates)).to.deep.equal([
      'ojs.queue.conversions.acme',
      'ojs.queue.conversions.acme.pdf',
      'ojs.queue.conversions.globex2',
      'ojs.queue.conversions.initech',
    ]);
    expect(matches(work, ['ojs.queue.conversions.hooli']), 'hooli has no bound of its own').to.have.length(1);
  });

  it("gives a tenant with its own settings its own policy, repeating every key, above the queue's, which leaves it out", () => {
    const own = named(policies, 'ojs.queue.conversions.globex');
    expect(own).to.deep.include({
      priority: TENANT_POLICY_PRIORITY,
      definition: { 'max-length': 10, overflow: 'reject-publish', 'queue-version': 2 },
    });
    expect(matches(own, candidates)).to.deep.equal(['ojs.queue.conversions.globex', 'ojs.queue.conversions.globex.pdf']);
    expect(
      policies.map((p) => p.name),
      'initech repeats the common value: no policy of its own',
    ).not.to.include('ojs.queue.conversions.initech');
  });

  it('keeps dead letters 30 days by default, bounded by dead_letter_max_size with drop-head; a tenant without either matches no policy', () => {
    const dead = named(policies, 'ojs.dead.conversions');
    expect(dead.definition).to.deep.equal({
      'message-ttl': 30 * 24 * 3600 * 1000,
      'max-length': 500,
      overflow: 'drop-head',
      'queue-version': 2,
    });
    expect(matches(dead, candidates)).to.deep.equal(['ojs.dead.conversions.acme']);
    // globex: no TTL but still the max size of _default, in a policy of its own.
    const globex = named(policies, 'ojs.dead.conversions.globex');
    expect(globex.definition).to.deep.equal({ 'max-length': 500, overflow: 'drop-head', 'queue-version': 2 });
    expect(matches(globex, candidates)).to.deep.equal(['ojs.dead.conversions.globex']);
    // Only the prefix's version policy: no bound.
    expect(policies.filter((p) => new RegExp(p.pattern).test('ojs.dead.conversions.hooli')).map((p) => p.name)).to.deep.equal([
      'ojs.queues',
    ]);
  });

  it('bounds a shared queue alone, in bytes, with drop-head for drop_oldest; its dead letters by their own TTL', () => {
    expect(matches(named(policies, 'ojs.queue.scan-specs'), candidates)).to.deep.equal(['ojs.queue.scan-specs']);
    expect(named(policies, 'ojs.queue.scan-specs').definition).to.deep.equal({
      'max-length-bytes': 1_000_000,
      overflow: 'drop-head',
      'queue-version': 2,
    });
    expect(named(policies, 'ojs.dead.scan-specs').definition).to.deep.equal({
      'message-ttl': 7 * 24 * 3600 * 1000,
      'max-length': 500,
      overflow: 'drop-head',
      'queue-version': 2,
    });
  });

  it('runs every classic queue of the prefix on queue version 2: its own policy carries the key, the prefix-wide one covers the rest', () => {
    const version = named(policies, 'ojs.queues');
    expect(version).to.deep.include({ priority: VERSION_POLICY_PRIORITY, definition: { 'queue-version': 2 } });
    expect(VERSION_POLICY_PRIORITY).to.be.below(QUEUE_POLICY_PRIORITY).and.above(0);
    const others = [
      'ojs.due.conversions.acme',
      'ojs.suspect.scan-specs',
      'ojs.delay.3',
      'ojs.unroutable',
      'ojs.parked',
      'ojs.queue.unbounded',
    ];
    expect(matches(version, [...others, 'ojs.tracking', 'ojsx.queue.a', 'other.queue.a'])).to.deep.equal(others);
    for (const policy of policies) expect(policy.definition['queue-version'], policy.name).to.equal(2);
  });

  it('puts no queue version anywhere once a queue is quorum (the ladder is quorum then, and a quorum queue takes no version)', () => {
    const quorum = compileConfig({ queues: { q: { type: 'quorum', max_size: 5 } } });
    const names = queuePolicies(quorum, []).map((p) => p.name);
    expect(names).not.to.include('ojs.queues');
    expect(named(queuePolicies(quorum, []), 'ojs.queue.q').definition).to.deep.equal({ 'max-length': 5, overflow: 'reject-publish' });
  });

  it('makes no work policy for an unbounded queue (RabbitMQ refuses an empty one), and covers implicit queues of the stages', () => {
    const names = policies.map((p) => p.name);
    expect(names).not.to.include('ojs.queue.unbounded');
    expect(names).to.include('ojs.dead.unbounded');
    expect(names).to.include('ojs.dead.implicit');
  });

  it('escapes the prefix and queue names and matches nothing of another prefix', () => {
    const other = compileConfig({ prefix: 'test-1a2b', queues: { q: { max_size: 1 } } });
    const work = named(queuePolicies(other, []), 'test-1a2b.queue.q');
    expect(work.pattern.startsWith('^test-1a2b\\.queue\\.q\\.')).to.equal(true);
    expect(
      matches(work, ['test-1a2b.queue.q.acme', 'test-1a2bXqueue.q.acme', 'test-1a2b.queue.qq.acme', 'test-1a2c.queue.q.acme']),
    ).to.deep.equal(['test-1a2b.queue.q.acme']);
  });
});

describe('queue settings in the configuration', () => {
  it("layers system, _default, the tenant's _default, the queue, the tenant's queue; null means unlimited", () => {
    // The settings' system defaults, as declared, fill what no layer sets.
    expect(settingsFor(config, 'conversions')).to.deep.equal({
      ...SYSTEM_QUEUE_SETTINGS,
      max_size: 100,
      dead_letter_max_size: 500,
    });
    const globex: Record<string, unknown> = { ...SYSTEM_QUEUE_SETTINGS, max_size: 10, dead_letter_max_size: 500 };
    delete globex.dead_letter_ttl; // globex wrote null: kept until purged
    expect(settingsFor(config, 'conversions', 'globex')).to.deep.equal(globex);
    expect(settingsFor(config, 'conversions', 'acme')).to.deep.equal(settingsFor(config, 'conversions'));
    const layered = compileConfig({
      tenants: [{ name: 'a', queues: { _default: { max_size: 5 } } }],
      queues: { _default: { max_size: 1 }, explicit: { max_size: 50 }, unlimited: { max_size: null } },
    });
    // The tenant's _default replaces _default; a queue's own value still wins over it.
    expect(settingsFor(layered, 'implicit', 'a').max_size).to.equal(5);
    expect(settingsFor(layered, 'explicit', 'a').max_size).to.equal(50);
    expect(settingsFor(layered, 'unlimited').max_size).to.equal(undefined);
    expect(layered.queues.get('unlimited')?.max_size).to.equal(undefined);
    expect(layered.tenants).to.deep.equal(['a']);
  });

  it('refuses tenant settings for a shared queue, a tenant listed twice, a TTL above 49 days and an unknown key', () => {
    const refused = (raw: unknown): string => {
      try {
        compileConfig(raw, 'p.json');
      } catch (err) {
        expect(err).to.be.instanceOf(ConfigError);
        return (err as ConfigError).key;
      }
      throw new Error('expected a ConfigError');
    };
    expect(refused({ tenants: [{ name: 'a', queues: { s: { max_size: 1 } } }], queues: { s: { scope: 'shared' } } })).to.equal(
      'tenants.0.queues.s',
    );
    expect(refused({ tenants: ['a', { name: 'a' }] })).to.equal('tenants.1');
    expect(refused({ queues: { q: { dead_letter_ttl: 'P50D' } } })).to.equal('queues.q.dead_letter_ttl');
    expect(refused({ tenants: [{ name: 'a', queues: { q: { default_timeout: 5 } } }] })).to.equal('tenants.0.queues.q.default_timeout');
    expect(refused({ tenants: [{ name: 'A' }] })).to.equal('tenants.0.name');
  });
});
