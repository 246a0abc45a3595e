import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { listDeadLetters, retryDeadLetters } from '../../src/dead-letters/dead-letter-actions.js';
import { replayUnroutable } from '../../src/dead-letters/unroutable.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { OJS_HEADERS, toWire } from '../../src/job/amqp-mapping.js';
import { createJob } from '../../src/job/envelope.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { delayRoutingKey } from '../../src/topology/delay-topology.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'tenant-origin' }, 'error');

/**
 * Dead letters and replays follow where a job physically was, never the tenant it claims: no
 * stagecoach action moves a job into another tenant's queues.
 */
describe('dead letters routed by origin, not by claim', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let running: RunningGroup;

  before(async () => {
    config = withTestConfig(
      {
        tenants: ['acme', 'globex'],
        queues: {
          work: { default_retry: { max_attempts: 1 }, dead_letter_queue: 'quarantine' },
          quarantine: {},
        },
        stages: { flaky: { module: './failure-stages.js' } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    // Only acme's stage runs: globex's queues are provisioned and must stay empty.
    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
  });

  after(() => running.stop());

  /** Every queue of globex that a job of the `work` pipeline could reach. */
  function globexQueues(): string[] {
    const { names } = running;
    return [
      names.queue('work', 'globex'),
      names.dueQueue('work', 'globex'),
      names.suspectQueue('work', 'globex'),
      names.deadQueue('work', 'globex'),
      names.queue('quarantine', 'globex'),
      names.dueQueue('quarantine', 'globex'),
      names.deadQueue('quarantine', 'globex'),
      names.queue('done', 'globex'),
    ];
  }

  async function globexTotal(): Promise<number> {
    const counts = await running.raw.counts(globexQueues());
    return Object.values(counts).reduce<number>((sum, n) => sum + (n ?? 0), 0);
  }

  it("keeps a job claiming globex that sits in acme's queue in acme's dead letters, through dead_letter_queue and dead retry", async () => {
    const { raw, names, group } = running;
    // A producer put a job naming globex, header and body, straight into acme's queue.
    const claim = createJob({ type: 'flaky', args: ['ok', 'claims-globex'] }, { queue: 'work', tenant: 'globex' });
    const wire = toWire(claim, { tenantHeader: config.tenantHeader });
    await raw.publish('', names.queue('work', 'acme'), wire.content, wire.options);

    const acmeDead = names.deadQueue('work', 'acme');
    await waitFor('the refused job in acme dead letters', async () => (await raw.count(acmeDead)) === 1, 10_000);
    // Counted once settled (after its tracking report), a little after the broker has it.
    await waitFor('the dead letter counted', () => group.runners[0].stats.deadLettered === 1, 10_000);
    // Not sent on to a dead_letter_queue: its claim is not to be trusted, globex's least of all.
    expect(await globexTotal(), 'globex queues after dead-lettering').to.equal(0);
    expect(await raw.count(names.queue('quarantine', 'acme'))).to.equal(0);
    const [entry] = await listDeadLetters(config, 'work', 'acme', log);
    expect(entry).to.include({ errorType: 'INVALID_PAYLOAD', tenant: 'globex' });

    // dead retry, for acme and for every tenant: kept where it is, globex untouched.
    expect(await retryDeadLetters(config, 'work', 'acme', log)).to.deep.equal({ retried: 0, kept: 1 });
    expect(await retryDeadLetters(config, 'work', undefined, log)).to.deep.equal({ retried: 0, kept: 1 });
    expect(await globexTotal(), 'globex queues after dead retry').to.equal(0);
    const [letter] = await raw.drain(acmeDead);
    expect(letter.properties.headers).to.include({
      [OJS_HEADERS.originQueue]: names.queue('work', 'acme'),
      [OJS_HEADERS.originTenant]: 'acme',
    });
  });

  it("sends an exhausted job to acme's dead_letter_queue, with its origin recorded", async () => {
    const { raw, names, publisher } = running;
    await publisher.publish('work', { type: 'flaky', args: ['always', 'exhausted'], tenant: 'acme' });
    const quarantine = names.queue('quarantine', 'acme');
    await waitFor('the exhausted job in quarantine', async () => (await raw.count(quarantine)) === 1, 10_000);
    const [moved] = await raw.drain(quarantine);
    const job = JSON.parse(moved.content.toString()) as Job;
    expect(job.tenant).to.equal('acme');
    expect(moved.properties.headers).to.include({ [OJS_HEADERS.originTenant]: 'acme' });
    expect(await globexTotal()).to.equal(0);
  });

  it('replays a job the delay ladder could not deliver to the physical queue it was bound for, not by its claim', async () => {
    const { raw, names } = running;
    // A retry parked before `due` queues existed: bound for the main queue, which the ladder no
    // longer delivers to, so it lands in unroutable.
    const parked = createJob({ type: 'flaky', args: ['ok', 'parked'] }, { queue: 'work', tenant: 'acme' });
    const wire = toWire(parked, { tenantHeader: config.tenantHeader });
    await raw.publish(names.retry, delayRoutingKey(0, names.queue('work', 'acme')), wire.content, wire.options);
    await waitFor('the parked retry in unroutable', async () => (await raw.count(names.unroutable)) === 1, 10_000);
    expect(await replayUnroutable(config, log)).to.deep.equal({ replayed: 1, kept: 0 });
    await waitFor('the parked retry run by acme', async () => (await raw.count(names.queue('done', 'acme'))) === 1, 10_000);
    expect(await raw.count(names.unroutable)).to.equal(0);
    await raw.drain(names.queue('done', 'acme'));
  });
});
