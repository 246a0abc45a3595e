import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { seen } from '../fixtures/failure-stages.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'stage-priority' }, 'error');

describe('a native stage runs higher priorities first', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let running: RunningGroup | undefined;

  before(async () => {
    config = withTestConfig(
      {
        queues: { work: { scope: 'shared', max_priority: 9 }, done: { scope: 'shared' } },
        stages: { flaky: { module: './failure-stages.js', concurrency: 1 } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(config, [{ stage: 'flaky' }], log);
  });

  after(async () => {
    await running?.stop();
  });

  it('jobs waiting in the queue start HIGH (10), NORMAL (0), LOW (-10), whatever order they were sent in', async () => {
    const group = running as RunningGroup;
    // Nobody consumes a paused queue: the jobs wait on the broker, then the stage takes them.
    await setQueueState(config, { queue: 'work' }, 'paused', log);
    await waitFor('the stage paused', () => group.group.runners.every((runner) => runner.state === 'paused'));
    const tag = `rank-${Date.now()}`;
    for (const [label, priority] of [
      ['low', -10],
      ['normal', 0],
      ['high', 10],
    ] as const) {
      await group.publisher.publish('work', { type: 'flaky', args: ['ok', `${tag}-${label}`], priority });
    }
    await setQueueState(config, { queue: 'work' }, 'active', log);
    const order = await waitFor('the three jobs run', () => {
      const keys = [...seen.keys()].filter((key) => key.startsWith(tag));
      return keys.length === 3 ? keys : undefined;
    });
    expect(order).to.deep.equal([`${tag}-high`, `${tag}-normal`, `${tag}-low`]);
  });
});
