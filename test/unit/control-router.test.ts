import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { ControlMessage } from '../../src/control/control-protocol.js';
import { createLogger } from '../../src/logging/logger.js';
import { ControlRouter } from '../../src/runner/process/control-router.js';
import type { StageRunner } from '../../src/runner/stage-runner.js';

const log = createLogger({ test: 'control-router' }, 'error');
const config = compileConfig({ tenants: ['acme', 'globex'] });

/** A runner as the router sees it: which tenant it serves and what it was asked. */
function fakeRunner(tenant: string, calls: string[]): StageRunner {
  const runner = {
    tenant,
    stopping: false,
    matches: (message: ControlMessage) => message.tenant === undefined || message.tenant === tenant,
    syncState: () => Promise.resolve(void calls.push(`sync ${tenant}`)),
    quiet: () => Promise.resolve(void calls.push(`quiet ${tenant}`)),
  };
  return runner as unknown as StageRunner;
}

function setup(connected = true) {
  const connection = connected ? (new EventEmitter() as unknown as AmqpConnection) : undefined;
  const calls: string[] = [];
  const runners = [fakeRunner('acme', calls), fakeRunner('globex', calls)];
  let terminated = 0;
  const router = new ControlRouter({
    config,
    log,
    targets: {
      runners,
      matching: (message) => runners.filter((r) => r.matches(message)),
      terminate: (matching, tenant) => {
        calls.push(`terminate ${matching.map((r) => r.tenant).join(',')} ${tenant ?? '-'}`);
        return Promise.resolve(tenant === undefined);
      },
    },
    directives: {
      forget: (about) => void calls.push(`forget ${JSON.stringify(about)}`),
      forgetAll: () => void calls.push('forget all'),
    },
    connection: () => connection,
    onTerminated: () => void terminated++,
    listener: { attach: () => Promise.resolve(), close: () => Promise.resolve() },
  });
  return { router, calls, terminated: () => terminated };
}

describe('ControlRouter (control messages to the runners they address)', () => {
  it('queue states: the runners addressed read their state again from the broker', async () => {
    const { router, calls } = setup();
    await router.route({ command: 'pause', queue: 'work', tenant: 'acme' });
    await router.route({ command: 'resume', queue: 'work' });
    expect(calls).to.deep.equal(['sync acme', 'sync acme', 'sync globex']);
  });

  it('reads no state while disconnected: the next attach reads them', async () => {
    const { router, calls } = setup(false);
    await router.route({ command: 'drain', queue: 'work' });
    expect(calls).to.deep.equal([]);
  });

  it('quiet goes to the runners addressed; a directive change forgets what the gate knew of it', async () => {
    const { router, calls } = setup();
    await router.route({ command: 'quiet', tenant: 'globex' });
    await router.route({ command: 'directive', batch: 'b-1' });
    expect(calls).to.deep.equal(['quiet globex', 'forget {"batch":"b-1"}']);
  });

  it('terminate: the roster stops (or releases) the runners addressed; the process ends when nothing is left', async () => {
    const { router, calls, terminated } = setup();
    await router.route({ command: 'terminate', tenant: 'acme' });
    expect(terminated()).to.equal(0);
    await router.route({ command: 'terminate' });
    expect(terminated()).to.equal(1);
    expect(calls).to.deep.equal(['terminate acme acme', 'terminate acme,globex -']);
  });
});
