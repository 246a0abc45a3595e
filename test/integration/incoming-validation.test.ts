import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageRunner } from '../../src/runner/stage-runner.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import type { BrokerNames } from '../../src/topology/names.js';
import { seen } from '../fixtures/failure-stages.js';
import type { RawBroker } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'incoming-validation' }, 'error');

const CONFIG: RawConfig = {
  tenants: ['acme'],
  queues: { work: { default_retry: { max_attempts: 3, initial_interval: 'PT1S', jitter: false } } },
  stages: { flaky: { module: './failure-stages.js' } },
};

describe('envelopes from other producers, checked on receipt (broker)', function () {
  let config: CompiledConfig;
  let running: RunningGroup;
  let names: BrokerNames;
  let raw: RawBroker;
  let runner: StageRunner;
  const work = (): string => names.queue('work', 'acme');
  const dead = (): string => names.deadQueue('work', 'acme');

  before(async () => {
    config = withTestConfig(CONFIG, path.join(here, '../fixtures/config.json'));
    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    ({ names, raw } = running);
    runner = running.group.runners[0];
  });

  after(() => running.stop());

  it('dead-letters a job whose retry policy has backoff_coefficient "x" as INVALID_PAYLOAD, before its handler and without a retry loop', async () => {
    const key = 'nan-backoff';
    // A producer in another language: plain amqplib, no stagecoach validation on its side. With
    // NaN delays and 20 attempts, a stage that trusts the policy retries at once, 19 times.
    const envelope = {
      id: 'nan-backoff-1',
      type: 'flaky',
      queue: 'work',
      args: ['always', key],
      tenant: 'acme',
      retry: { max_attempts: 20, initial_interval: 'PT1S', backoff_coefficient: 'x' },
    };
    await raw.publish('', work(), JSON.stringify(envelope), {
      contentType: 'application/openjobspec+json',
      headers: { 'x-ojs-tenant': 'acme' },
    });

    await waitFor('the job in the dead-letter queue', async () => (await raw.count(dead())) === 1, 10000);
    await waitFor('the stage to count it dead', () => runner.stats.deadLettered === 1, 5000);
    const [letter] = await raw.drain(dead());
    expect(letter.properties.headers?.['x-ojs-error-type']).to.equal('INVALID_PAYLOAD');
    expect(String(letter.properties.headers?.['x-ojs-error-message'])).to.equal(
      `the envelope's "retry": backoff_coefficient must be a number >= 1`,
    );
    expect(JSON.parse(letter.content.toString()), 'the body is kept as it came').to.deep.equal(envelope);
    expect(seen.get(key)?.length ?? 0, 'handler runs').to.equal(0);
    expect(runner.stats.retried, 'retries').to.equal(0);
    expect(await raw.count(work()), 'nothing left in the input queue').to.equal(0);
  });
});
