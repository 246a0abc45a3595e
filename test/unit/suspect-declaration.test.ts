import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import type { Logger } from '../../src/logging/logger.js';
import { SuspectDeclaration } from '../../src/runner/intake/suspect-declaration.js';
import type { Topology } from '../../src/topology/topology.types.js';

const part: Topology = {
  exchanges: [],
  queues: [{ name: 'ojs.suspect.work.acme', durable: true, arguments: {} }],
  bindings: [{ source: 'ojs.delay.deliver', destination: 'ojs.suspect.work.acme', destinationType: 'queue', routingKey: 'suspect' }],
};

function declaration(plan: Array<'ok' | 'fail'> = []) {
  const declared: Array<{ connection: AmqpConnection; topology: Topology }> = [];
  const errors: unknown[] = [];
  const log = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: (...args: unknown[]) => errors.push(args) };
  const suspect = new SuspectDeclaration({
    topology: part,
    queue: 'ojs.suspect.work.acme',
    log: log as unknown as Logger,
    declare: (connection, topology) => {
      declared.push({ connection, topology });
      return plan.shift() === 'fail' ? Promise.reject(new Error('PRECONDITION_FAILED')) : Promise.resolve();
    },
  });
  return { suspect, declared, errors };
}

describe('SuspectDeclaration (a pooled tenant suspect queue, declared on first use)', () => {
  it('declares its suspect part once per connection, moves at once sharing the one declaration; again on the next connection', async () => {
    const { suspect, declared } = declaration();
    const first = {} as AmqpConnection;
    suspect.attach(first);
    await Promise.all([suspect.ensure(), suspect.ensure()]);
    await suspect.ensure();
    expect(declared).to.deep.equal([{ connection: first, topology: part }]);
    // The same connection attached again (a runner re-attached): nothing new.
    suspect.attach(first);
    await suspect.ensure();
    expect(declared).to.have.length(1);
    const second = {} as AmqpConnection;
    suspect.attach(second);
    await suspect.ensure();
    expect(declared.map((d) => d.connection)).to.deep.equal([first, second]);
  });

  it('a failed declaration is thrown and logged, and forgotten: the next move declares again', async () => {
    const { suspect, declared, errors } = declaration(['fail']);
    suspect.attach({} as AmqpConnection);
    const err = await suspect.ensure().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(Error).with.property('message', 'PRECONDITION_FAILED');
    expect(errors).to.have.length(1);
    await suspect.ensure();
    expect(declared).to.have.length(2);
  });

  it('without a connection (detached), nothing is declared and the move fails', async () => {
    const { suspect, declared } = declaration();
    suspect.attach({} as AmqpConnection);
    suspect.detach();
    const err = await suspect.ensure().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(Error);
    expect(declared).to.deep.equal([]);
  });
});
