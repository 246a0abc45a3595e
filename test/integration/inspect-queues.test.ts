import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { inspectQueues } from '../../src/inspect/inspect-queues.js';
import type { QueueReport } from '../../src/inspect/queue-report.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { runCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'inspect-queues' }, 'error');
const env = { AMQP_URL };

function row(reports: QueueReport[], queue: string, tenant?: string, variant?: string): QueueReport {
  const found = reports.find((r) => r.queue === queue && r.tenant === tenant && r.variant === variant);
  if (found === undefined) throw new Error(`no row for ${queue} ${tenant ?? ''} ${variant ?? ''}`);
  return found;
}

describe('stagecoach queues (inspection)', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let publisher: Publisher;

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', { name: 'globex', queues: { conversions: { max_size: 20 } } }],
        queues: {
          conversions: { max_size: 10, concurrency: 4, variants: { by: 'mime', values: { pdf: ['application/pdf'] } } },
          specs: { scope: 'shared', rate_limit: { limit: 50, period: 'PT1S' } },
        },
        stages: {},
      },
      [],
      'inspect',
    );
    publisher = await Publisher.connect(project.config, { log });
    const { config, names, raw } = project;
    await setQueueState(config, { queue: 'conversions', tenant: 'acme' }, 'paused', log);
    await setQueueState(config, { queue: 'conversions', tenant: 'globex' }, 'draining', log);
    for (let i = 0; i < 3; i++) await publisher.publish('conversions', { type: 'doc.convert', args: [i], tenant: 'acme' });
    for (let i = 0; i < 2; i++) {
      await publisher.publish('conversions', { type: 'doc.convert', args: [i], tenant: 'acme', headers: { mime: 'application/pdf' } });
    }
    await publisher.publish('specs', { type: 'spec', args: [] });
    await raw.publish('', names.deadQueue('conversions', 'acme'), 'a dead letter');
  });

  after(async () => {
    await publisher?.close();
    await project?.remove();
  });

  it('reports every physical queue with its state, depths, bound and companions', async () => {
    const { config, names } = project;
    // The counts are the management plugin's samples: wait for them to catch up.
    const reports = await waitFor(
      'the published jobs sampled',
      async () => {
        const now = await inspectQueues(config);
        return row(now, 'conversions', 'acme').ready === 3 &&
          row(now, 'conversions', 'acme', 'pdf').ready === 2 &&
          row(now, 'specs').ready === 1 &&
          row(now, 'conversions', 'acme').dead.ready === 1 &&
          // The policy a queue's statistics name is sampled too.
          row(now, 'conversions', 'acme').max_size !== null &&
          row(now, 'conversions', 'globex').max_size !== null
          ? now
          : undefined;
      },
      30_000,
    );
    expect(reports.map((r) => r.name)).to.deep.equal([
      names.queue('conversions', 'acme'),
      names.queue('conversions', 'acme', 'pdf'),
      names.queue('conversions', 'globex'),
      names.queue('conversions', 'globex', 'pdf'),
      names.queue('specs'),
    ]);

    const acme = row(reports, 'conversions', 'acme');
    expect(acme).to.include({ scope: 'tenant', state: 'paused', drained: false, unacked: 0, consumers: 0 });
    expect(acme).to.include({ max_size: 10, configured_max_size: 10, max_size_use: 0.3 });
    expect(acme.max_size_source).to.equal(`policy ${names.prefix}.queue.conversions`);
    expect(acme.due).to.deep.equal({ name: names.dueQueue('conversions', 'acme'), exists: true, ready: 0, unacked: 0 });
    expect(acme.suspect.exists).to.equal(true);
    expect(acme.dead).to.include({ name: names.deadQueue('conversions', 'acme'), ready: 1 });
    expect(row(reports, 'conversions', 'acme', 'pdf')).to.include({ state: 'paused', ready: 2, variant: 'pdf' });

    const globex = row(reports, 'conversions', 'globex');
    expect(globex).to.include({ state: 'draining', drained: true, ready: 0, max_size: 20, configured_max_size: 20 });
    expect(globex.max_size_source).to.equal(`policy ${names.prefix}.queue.conversions.globex`);

    expect(row(reports, 'specs')).to.include({ scope: 'shared', state: 'active', ready: 1, max_size: null, max_size_use: null });
    expect(row(reports, 'specs').tenant).to.equal(undefined);

    // Each physical queue's own flow limits; no stage has taken a token yet, so nothing is known to run.
    expect(acme.limits).to.deep.equal({
      key: `queue:${names.queue('conversions', 'acme')}`,
      concurrency: 4,
      rate_limit: null,
      active: null,
      current_count: null,
    });
    expect(row(reports, 'conversions', 'acme', 'pdf').limits?.key).to.equal(`queue:${names.queue('conversions', 'acme', 'pdf')}`);
    expect(row(reports, 'specs').limits).to.include({ concurrency: null, current_count: null });
    expect(row(reports, 'specs').limits?.rate_limit).to.deep.equal({ limit: 50, period: 'PT1S', period_ms: 1000 });

    // One tenant: the broker filters the listings (paged, by name), and the rows are the same
    // as that tenant's in the whole listing, states, companions and limits included.
    for (const tenant of ['acme', 'globex']) {
      const own = await inspectQueues(config, { tenant });
      const whole = (await inspectQueues(config)).filter((r) => r.tenant === tenant);
      const stable = (r: QueueReport): unknown => ({ ...r, publish_rate: null, deliver_rate: null });
      expect(own.map(stable), tenant).to.deep.equal(whole.map(stable));
      expect(own.map((r) => r.state)).to.deep.equal(tenant === 'acme' ? ['paused', 'paused'] : ['draining', 'draining']);
    }
  });

  it('prints a table, or JSON with --json; --tenant selects one tenant', async () => {
    const { file, names } = project;
    const table = await runCli(['queues', '--config', file], env);
    expect(table.code, table.stderr).to.equal(0);
    const lines = table.stdout.split('\n');
    expect(lines[0]).to.match(
      /^QUEUE\s+TENANT\s+VARIANT\s+STATE\s+READY\s+UNACKED\s+CONSUMERS\s+IN\/S\s+OUT\/S\s+MAX_SIZE\s+USE\s+DUE\s+SUSPECT\s+DEAD\s+LIMITS$/,
    );
    expect(lines.find((l) => l.startsWith('conversions') && l.includes('globex') && !l.includes('pdf'))).to.contain('draining (drained)');
    expect(lines.find((l) => l.startsWith('conversions') && l.includes('acme') && !l.includes('pdf'))).to.match(/paused\s+3\s+0\s+0/);
    expect(table.stdout).to.contain("management plugin's samples");
    expect(lines.find((l) => l.startsWith('conversions') && l.includes('acme') && !l.includes('pdf'))).to.match(/\s-\/4 run$/);
    expect(lines.find((l) => l.startsWith('specs'))).to.match(/\s50\/s$/);

    const json = await runCli(['queues', '--tenant', 'acme', '--json', '--config', file], env);
    expect(json.code, json.stderr).to.equal(0);
    const reports = JSON.parse(json.stdout) as QueueReport[];
    expect(reports.map((r) => r.name)).to.deep.equal([names.queue('conversions', 'acme'), names.queue('conversions', 'acme', 'pdf')]);
    expect(reports[0].limits).to.include({ concurrency: 4, active: null });
  });

  it('exits 2 naming what was wrong', async () => {
    const { file } = project;
    const bad = await runCli(['queues', '--tenant', 'Acme.pdf', '--config', file], env);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.contain('--tenant');
    const unknown = await runCli(['queues', '--tenant', 'nobody', '--config', file], env);
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.contain('tenant "nobody" is neither configured nor has queues');
    const flag = await runCli(['queues', '--bogus', '--config', file], env);
    expect(flag.code).to.equal(2);
    expect(flag.stderr).to.contain('--bogus');
  });
});
