import { expect } from 'chai';
import { matches, RouteCheck } from '../../src/dead-letters/route-check.js';
import type { BrokerBinding, BrokerExchange, ManagementClient } from '../../src/broker-management/management-client.js';

const binding = (source: string, destination: string, routing_key = '', args: Record<string, unknown> = {}, toExchange = false) =>
  ({
    source,
    destination,
    destination_type: toExchange ? 'exchange' : 'queue',
    routing_key,
    arguments: args,
  }) as BrokerBinding;

const exchange = (name: string, type: string, alternate?: string) =>
  ({
    name,
    type,
    durable: true,
    auto_delete: false,
    internal: false,
    arguments: alternate === undefined ? {} : { 'alternate-exchange': alternate },
  }) as BrokerExchange;

/** A broker with stagecoach's entry topology for tenant acme: `work` plain, `docs` with a pdf variant. */
function broker(): ManagementClient {
  const exchanges = [
    exchange('p.unroutable', 'fanout'),
    exchange('p.root', 'headers', 'p.unroutable'),
    exchange('p.tenant.acme', 'direct', 'p.unroutable'),
    exchange('p.variants.docs.acme', 'headers', 'p.general.docs.acme'),
    exchange('p.general.docs.acme', 'fanout'),
  ];
  const bindings = [
    binding('p.unroutable', 'p.unroutable'),
    binding('p.root', 'p.tenant.acme', '', { 'x-match': 'all-with-x', 'x-ojs-tenant': 'acme' }, true),
    binding('p.tenant.acme', 'p.queue.work.acme', 'work'),
    binding('p.tenant.acme', 'p.variants.docs.acme', 'docs', {}, true),
    binding('p.variants.docs.acme', 'p.queue.docs.acme.pdf', '', { 'x-match': 'any', mime: 'application/pdf' }),
    binding('p.general.docs.acme', 'p.queue.docs.acme', ''),
  ];
  return {
    getExchange: async (_vhost: string, name: string) => exchanges.find((e) => e.name === name),
    bindingsFrom: async (_vhost: string, name: string) => bindings.filter((b) => b.source === name),
  } as unknown as ManagementClient;
}

describe('RouteCheck: would a replayed job arrive in a queue', () => {
  it('follows the tenant binding, the queue binding, variants and their fallback', async () => {
    const check = new RouteCheck(broker(), '/', 'p.unroutable');
    expect(await check.arrives('p.root', 'work', { 'x-ojs-tenant': 'acme' })).to.equal(true);
    expect(await check.arrives('p.root', 'docs', { 'x-ojs-tenant': 'acme', mime: 'application/pdf' })).to.equal(true);
    expect(await check.arrives('p.root', 'docs', { 'x-ojs-tenant': 'acme', mime: 'text/plain' })).to.equal(true);
  });

  it('says no when only the alternate exchange would take it: an unknown tenant, or a queue its tenant does not have', async () => {
    const check = new RouteCheck(broker(), '/', 'p.unroutable');
    expect(await check.arrives('p.root', 'work', { 'x-ojs-tenant': 'initech' })).to.equal(false);
    expect(await check.arrives('p.root', 'ghost', { 'x-ojs-tenant': 'acme' })).to.equal(false);
    expect(await check.arrives('p.root', 'work', {})).to.equal(false);
    expect(await check.arrives('p.missing', 'work', { 'x-ojs-tenant': 'acme' })).to.equal(false);
  });

  it('matches bindings as RabbitMQ does: x-match all/any, x- headers only with -with-x, topic wildcards', () => {
    const h = (args: Record<string, unknown>) => binding('x', 'q', '', args);
    expect(matches('headers', h({ 'x-match': 'all', 'x-t': 'a' }), '', { 'x-t': 'b' })).to.equal(true);
    expect(matches('headers', h({ 'x-match': 'all-with-x', 'x-t': 'a' }), '', { 'x-t': 'b' })).to.equal(false);
    expect(matches('headers', h({ 'x-match': 'any', a: '1', b: '2' }), '', { b: '2' })).to.equal(true);
    expect(matches('headers', h({ a: '1', b: '2' }), '', { b: '2' })).to.equal(false);
    expect(matches('headers', h({ 'x-match': 'any' }), '', { b: '2' })).to.equal(false);
    expect(matches('headers', h({ a: '1' }), '', { a: Buffer.from('1') })).to.equal(true);
    expect(matches('topic', binding('x', 'q', 'a.*.c'), 'a.b.c', {})).to.equal(true);
    expect(matches('topic', binding('x', 'q', 'a.#'), 'a', {})).to.equal(true);
    expect(matches('topic', binding('x', 'q', '#.c'), 'a.b.c', {})).to.equal(true);
    expect(matches('topic', binding('x', 'q', 'a.*'), 'a.b.c', {})).to.equal(false);
    expect(matches('direct', binding('x', 'q', 'work'), 'work', {})).to.equal(true);
    expect(matches('direct', binding('x', 'q', 'work'), 'other', {})).to.equal(false);
  });
});
