import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { compileConfig, SCHEMA_PATH } from '../../src/config/compile-config.js';
import { ConfigError, StagecoachError } from '../../src/errors/errors.js';
import { flagName, parseFlagName } from '../../src/flags/flag.js';
import { Stage } from '../../src/stage/stage.decorator.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames, parseBrokerName } from '../../src/topology/names.js';
import { policyTarget, queuePolicies } from '../../src/topology/queue-policies.js';
import { checkQueueName, isQueueName, QUEUE_NAME, queueOfWord, queueWord } from '../../src/util/queue-name.js';

describe('queue names, as OJS writes them', () => {
  it('takes the names of ojs-core 5.1 (and "_"), up to 255 characters, and nothing else', () => {
    for (const name of ['default', 'py.dotted', 'scan-specs', 'scan_specs', 'a', '0.v2.emails', 'x'.repeat(255)]) {
      expect(isQueueName(name), name).to.equal(true);
    }
    for (const name of ['', 'Default', '-lead', '.lead', '_lead', 'with space', 'a/b', 'a:b', 'a~b', 'x'.repeat(256), 42, null]) {
      expect(isQueueName(name), String(name)).to.equal(false);
    }
    expect(() => checkQueueName('Py.Dotted', '--queue'))
      .to.throw(StagecoachError, /--queue: "Py.Dotted" is not a queue name/)
      .with.property('code', 'INVALID_REQUEST');
  });

  it("is the pattern of the shipped JSON Schema (queues and a tenant's queues)", () => {
    const schema = JSON.parse(readFileSync(SCHEMA_PATH, 'utf8')) as {
      definitions: {
        queueKey: { pattern: string };
        schedule: { properties: { queue: { pattern: string } } };
        queue: { properties: { dead_letter_queue: { pattern: string } } };
      };
    };
    expect(schema.definitions.queueKey.pattern).to.equal(`^(_default|${QUEUE_NAME.source.slice(1, -1)})$`);
    expect(schema.definitions.schedule.properties.queue.pattern, "a schedule's queue").to.equal(QUEUE_NAME.source);
    expect(schema.definitions.queue.properties.dead_letter_queue.pattern, 'a dead_letter_queue').to.equal(QUEUE_NAME.source);
    expect(QUEUE_NAME.flags).to.equal('');
    const config = compileConfig({ tenants: [{ name: 'acme', queues: { 'py.dotted': { max_size: 5 } } }], queues: { 'py.dotted': {} } });
    expect(config.queues.has('py.dotted')).to.equal(true);
    expect(() => compileConfig({ queues: { Conversions: {} } })).to.throw(ConfigError, /queues/);
  });

  it('writes a dotted queue on the broker as one word, so no two queues, tenants and variants share a name', () => {
    const names = new BrokerNames('ojs');
    expect(queueWord('py.dotted')).to.equal('py~dotted');
    expect(queueOfWord('py~dotted')).to.equal('py.dotted');
    expect(queueWord('scan-specs')).to.equal('scan-specs');
    // Queue "a.b" of tenant "c", and queue "a" of tenant "b", variant "c".
    expect(names.queue('a.b', 'c')).to.equal('ojs.queue.a~b.c');
    expect(names.queue('a', 'b', 'c')).to.equal('ojs.queue.a.b.c');
    expect(parseBrokerName('ojs', names.queue('a.b', 'c'))).to.deep.equal({ kind: 'queue', queue: 'a.b', tenant: 'c' });
    expect(parseBrokerName('ojs', names.queue('a', 'b', 'c'))).to.deep.equal({ kind: 'queue', queue: 'a', tenant: 'b', variant: 'c' });
    for (const made of [names.dueQueue('x.y.z', 'acme', 'pdf'), names.suspectQueue('x.y.z'), names.deadQueue('x.y.z', 'acme')]) {
      expect(parseBrokerName('ojs', made)?.queue, made).to.equal('x.y.z');
    }
    expect(names.variantExchange('x.y', 'acme')).to.equal('ojs.variants.x~y.acme');
    const paused = { kind: 'queue-paused', queue: 'x.y', tenant: 'acme', variant: 'pdf' } as const;
    expect(flagName('ojs', paused)).to.equal('ojs.state.paused.x~y.acme.pdf');
    expect(parseFlagName('ojs', flagName('ojs', paused))).to.deep.equal(paused);
  });

  it('keeps the names of queues without dots as they were', () => {
    const names = new BrokerNames('ojs');
    expect(names.queue('conversions', 'acme', 'pdf')).to.equal('ojs.queue.conversions.acme.pdf');
    expect(parseBrokerName('ojs', 'ojs.dead.scan_specs')).to.deep.equal({ kind: 'dead', queue: 'scan_specs' });
  });

  it("names a dotted queue's policies by its word and reads them back", () => {
    const config = compileConfig({
      tenants: [{ name: 'acme', queues: { 'py.dotted': { max_size: 5 } } }],
      queues: { 'py.dotted': { max_size: 9 } },
    });
    const policies = queuePolicies(config, []).filter((policy) => policy.name.includes('py~dotted'));
    expect(policies.map((policy) => policy.name).sort()).to.include.members(['ojs.queue.py~dotted', 'ojs.queue.py~dotted.acme']);
    for (const policy of policies) expect(policyTarget('ojs', policy.name)?.queue).to.equal('py.dotted');
    expect(provisionTopology(config, []).queues.map((queue) => queue.name)).to.include('ojs.queue.py~dotted.acme');
  });

  it('refuses a broker name longer than RabbitMQ takes, naming the limit', () => {
    expect(() => new BrokerNames('ojs').suspectQueue('q'.repeat(255), 'acme')).to.throw(StagecoachError, /more than RabbitMQ's 255/);
  });

  it('@Stage takes the same names', () => {
    class Dotted {}
    expect(() => Stage({ name: 'dotted', input: 'in.box', outputs: ['out-box'] })(Dotted)).to.not.throw();
    class Shouting {}
    expect(() => Stage({ name: 'shouting', input: 'INBOX' })(Shouting)).to.throw(TypeError, /not a queue name/);
  });
});
