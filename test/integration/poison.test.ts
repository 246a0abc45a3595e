import { expect } from 'chai';
import type { CompiledConfig } from '../../src/config/config.types.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { BrokerNames } from '../../src/topology/names.js';
import { finished, spawnCli } from '../helpers/cli.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';

/**
 * A job that SIGKILLs every process that takes it, with the stage restarted after each death
 * as a container runtime would: the job must end in dead letters as POISON after max_attempts
 * deliveries, and the jobs behind it must be processed, not dragged down with it.
 */
describe('poison jobs', function () {
  const stages = [{ name: 'flaky', input: 'work', outputs: ['done'] }];
  let project: ConfigFile;
  let file: string;
  let config: CompiledConfig;
  let names: BrokerNames;
  let raw: RawBroker;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme'],
        queues: { work: { default_retry: { max_attempts: 3, initial_interval: 'PT1S', jitter: false } } },
        stages: { flaky: { module: FAILURE_STAGES_MODULE, concurrency: 2 } },
      },
      stages,
      'poison',
    );
    ({ file, config, names, raw } = project);
  });

  after(() => project.remove());

  /**
   * Restarts the stage whenever it dies, as a container runtime would, until `done()` holds or
   * `runs` runs are over; a run that reaches the goal is stopped with SIGTERM.
   * @returns how many runs were killed.
   */
  const runLogs: string[] = [];
  async function superviseUntil(done: () => Promise<boolean>, runs = 10): Promise<number> {
    let killed = 0;
    for (let run = 0; run < runs && !(await done()); run++) {
      const stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--config', file], { AMQP_URL });
      const exited = finished(stage, 30000, 'run flaky');
      void exited.then((result) => runLogs.push(`run ${runLogs.length + 1}:\n${result.stderr}`));
      const outcome = await Promise.race([
        exited.then(() => 'exited' as const),
        waitFor('the goal', done, 30000).then(() => 'done' as const),
      ]);
      if (outcome === 'exited') {
        expect(stage.signalCode, stage.err).to.equal('SIGKILL');
        killed++;
      } else {
        stage.kill('SIGTERM');
        expect((await exited).code).to.equal(0);
      }
    }
    return killed;
  }

  it('runs a suspect alone: innocent jobs published behind it run exactly once, at attempt 1 (defect 2)', async () => {
    const dead = names.deadQueue('work', 'acme');
    const done = names.queue('done', 'acme');
    const publisher = await Publisher.connect(config, { log: createLogger({}, 'error') });
    try {
      await publisher.publish('work', { type: 'flaky', args: ['kill', 'poison-alone'], tenant: 'acme' });
      // Its first death, from the main queue: nothing else was there to take down with it.
      expect(await superviseUntil(() => Promise.resolve(false), 1), 'one run, killed').to.equal(1);
      // The broker may not have seen the dead process's connection close yet: a job published now
      // could be delivered to its consumer, and come back redelivered, as from a crash it was in.
      await waitFor('the killed consumer gone', async () => (await raw.consumers(names.queue('work', 'acme'))) === 0, 15_000);
      // Innocent jobs queue up behind it; each takes a while, so several run at once.
      for (let i = 0; i < 5; i++) await publisher.publish('work', { type: 'flaky', args: ['slow', `innocent-${i}`, 800], tenant: 'acme' });
    } finally {
      await publisher.close();
    }
    const killed = await superviseUntil(async () => (await raw.count(dead)) === 1 && ((await raw.count(done)) ?? 0) >= 5);
    expect(killed, 'deaths after the first: the suspect alone, at attempts 2 and 3').to.equal(2);
    const [letter] = await raw.drain(dead);
    expect((JSON.parse(letter.content.toString()) as Job).error?.type).to.equal('POISON');
    const results = (await raw.drain(done)).map((m) => (JSON.parse(m.content.toString()) as Job).args as [string, number]);
    const expected = Array.from({ length: 5 }, (_, i) => [`innocent-${i}`, 1]);
    if (JSON.stringify(results.sort()) !== JSON.stringify(expected)) {
      // On failure, the stage's own account of each run says where a job went.
      for (const text of runLogs)
        console.log(
          text
            .split('\n')
            .filter((line) => /suspect|redelivered|state|retry|dead/.test(line))
            .join('\n'),
        );
    }
    expect(results.sort(), 'each innocent job once, never counted as a crash').to.deep.equal(expected);
  });

  it('dead-letters a job that kills its process as POISON after max_attempts deliveries, then processes the rest', async () => {
    const publisher = await Publisher.connect(config, { log: createLogger({}, 'error') });
    const poisonId = await publisher.publish('work', { type: 'flaky', args: ['kill', 'poison'], tenant: 'acme' });
    for (let i = 0; i < 4; i++) await publisher.publish('work', { type: 'flaky', args: ['ok', `good-${i}`], tenant: 'acme' });
    await publisher.close();

    const dead = names.deadQueue('work', 'acme');
    const done = names.queue('done', 'acme');
    let killed = 0;
    // Restart the stage whenever it dies, as a container runtime would; bounded.
    for (let run = 0; run < 8 && (await raw.count(dead)) === 0; run++) {
      const stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--config', file], { AMQP_URL });
      const exited = finished(stage, 20000, 'run flaky');
      const outcome = await Promise.race([
        exited.then(() => 'exited' as const),
        waitFor('a dead letter', async () => (await raw.count(dead)) === 1, 20000).then(() => 'dead' as const),
      ]);
      if (outcome === 'exited') {
        expect(stage.signalCode, stage.err).to.equal('SIGKILL');
        killed++;
      } else {
        stage.kill('SIGTERM');
        expect((await exited).code).to.equal(0);
      }
    }
    expect(killed, 'deliveries of the poison job').to.equal(3);
    const [letter, ...more] = await raw.drain(dead);
    expect(more).to.have.length(0);
    const job = JSON.parse(letter.content.toString()) as Job;
    expect(job.id).to.equal(poisonId);
    expect(job.error?.type).to.equal('POISON');
    expect(letter.properties.headers).to.include({ 'x-ojs-error-type': 'POISON', 'x-ojs-attempt': 3 });

    // Everything behind the poison job is processed. Delivery is at-least-once: a good job that
    // was running beside the poison job when the process died may have emitted before it was
    // acknowledged, and runs again.
    const results = new Set<unknown>();
    const collect = async (): Promise<boolean> => {
      for (const m of await raw.drain(done)) results.add((JSON.parse(m.content.toString()) as Job).args[0]);
      return results.size === 4;
    };
    if (!(await collect())) {
      const stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--config', file], { AMQP_URL });
      try {
        await waitFor('the good jobs done', collect);
      } finally {
        stage.kill('SIGTERM');
        await finished(stage, 15000, 'run flaky');
      }
    }
    expect([...results].sort()).to.deep.equal(['good-0', 'good-1', 'good-2', 'good-3']);
    expect(await raw.counts([names.queue('work', 'acme'), names.suspectQueue('work', 'acme')])).to.deep.equal({
      [names.queue('work', 'acme')]: 0,
      [names.suspectQueue('work', 'acme')]: 0,
    });
  });
});
