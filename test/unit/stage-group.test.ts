import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { GroupLifecycle } from '../../src/runner/process/group-lifecycle.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { withTestConfig } from '../../src/testing/test-config.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'stage-group' }, 'error');

/** Resolves with what `promise` settled to, or 'pending' if it has not settled by the next macrotask. */
async function settled(promise: Promise<unknown>): Promise<unknown> {
  let result: unknown = 'pending';
  promise.then(
    (value) => (result = { value }),
    (err: unknown) => (result = { err }),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return result;
}

describe('GroupLifecycle', () => {
  it('goes starting -> running -> stopping -> stopped, forward only', async () => {
    const lifecycle = new GroupLifecycle();
    expect(lifecycle.state).to.equal('starting');
    expect(lifecycle.run()).to.equal(true);
    expect(lifecycle.run()).to.equal(false);
    expect(lifecycle.state).to.equal('running');
    const stopped = lifecycle.stop(() => Promise.resolve(true));
    expect(lifecycle.state).to.equal('stopping');
    expect(lifecycle.stopping).to.equal(true);
    expect(await stopped).to.equal(true);
    expect(lifecycle.state).to.equal('stopped');
    expect(lifecycle.run()).to.equal(false);
  });

  it('a second stop waits for the first and gets its result; the shutdown runs once', async () => {
    const lifecycle = new GroupLifecycle();
    let runs = 0;
    let finish!: (drained: boolean) => void;
    const shutdown = (): Promise<boolean> => {
      runs++;
      return new Promise<boolean>((resolve) => (finish = resolve));
    };
    const first = lifecycle.stop(shutdown);
    const second = lifecycle.stop(() => Promise.resolve(true));
    expect(second).to.equal(first);
    expect(await settled(second)).to.equal('pending');
    finish(false);
    expect(await second).to.equal(false);
    expect(runs).to.equal(1);
  });

  it('ends `stopped` when the shutdown fails, every caller getting the failure', async () => {
    const lifecycle = new GroupLifecycle();
    const first = lifecycle.stop(() => Promise.reject(new Error('close failed')));
    const errors = await Promise.all([first, lifecycle.stop(() => Promise.resolve(true))].map((p) => p.catch((err: Error) => err.message)));
    expect(errors).to.deep.equal(['close failed', 'close failed']);
    expect(lifecycle.state).to.equal('stopped');
  });
});

describe('StageGroup lifecycle (no broker reachable)', () => {
  // Nothing listens on port 1: the group keeps retrying to connect, as against a broker still starting.
  const config = withTestConfig(
    { tenants: ['acme'], broker: { url: 'amqp://guest:guest@127.0.0.1:1/' }, stages: { flaky: { module: './failure-stages.js' } } },
    path.join(here, '../fixtures/config.json'),
  );

  it('is not ready while it waits for the broker; a stop ends the wait, and a second stop waits for the first', async () => {
    const [stage] = await loadAllStages(config);
    const group = new StageGroup(config, [{ stage, tenant: 'acme' }], log, { payloads: false });
    expect(group.state).to.equal('starting');
    const starting = group.start();
    expect(await settled(starting)).to.equal('pending');
    expect(group.readiness()).to.deep.equal({ ready: false, reason: 'not connected to the broker' });

    const first = group.stop(1000);
    const second = group.stop(1000);
    expect(second).to.equal(first);
    expect(group.state).to.equal('stopping');
    expect(await first).to.equal(true);
    expect(await second).to.equal(true);
    expect(group.state).to.equal('stopped');
    expect(await starting.catch((err: Error) => err.message)).to.match(/closed before it connected/);
    expect(group.runners.map((r) => r.state)).to.deep.equal(['stopped']);
    expect(group.connections).to.equal(0);
  });

  it('addTenant is for pooled groups only; a pooled group takes no tenant once stopping', async () => {
    const [stage] = await loadAllStages(config);
    const single = new StageGroup(config, [{ stage, tenant: 'acme' }], log, { payloads: false });
    expect(await single.addTenant('globex').catch((err: Error) => err.message)).to.equal('addTenant: not a pooled group');
    await single.stop(1000);

    const pooled = new StageGroup(config, [{ stage, tenant: 'acme' }], log, { payloads: false, pooled: { stage } });
    expect(pooled.pool?.channels).to.equal(2 + 1);
    expect(await pooled.addTenant('globex')).to.equal(true);
    expect(pooled.tenants).to.deep.equal(['acme', 'globex']);
    const stopping = pooled.stop(1000);
    expect(await pooled.addTenant('initech')).to.equal(false);
    expect(await stopping).to.equal(true);
    expect(pooled.runners.map((r) => r.state)).to.deep.equal(['stopped', 'stopped']);
  });
});
