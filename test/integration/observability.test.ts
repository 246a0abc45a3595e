import { createServer } from 'node:net';
import { expect } from 'chai';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { BrokerNames } from '../../src/topology/names.js';
import { finished, spawnCli } from '../helpers/cli.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';

const log = createLogger({ test: 'observability' }, 'error');
const STAGES = [{ name: 'flaky', input: 'work', outputs: ['done'] }];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The value of one sample of the Prometheus text, e.g. `stagecoach_acks_total{...tenant="acme"}`. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

describe('health endpoints, metrics and logs of a running stage', function () {
  let project: ConfigFile;
  let file: string;
  let config: CompiledConfig;
  let names: BrokerNames;
  let raw: RawBroker;

  before(async () => {
    project = await writeConfigFile(
      { tenants: ['acme'], stages: { flaky: { module: FAILURE_STAGES_MODULE, concurrency: 4 } } },
      STAGES,
      'observability',
    );
    ({ file, config, names, raw } = project);
  });

  after(() => project.remove());

  it('serves /healthz, /readyz and /metrics whose counts match the jobs processed, and logs with job fields', async () => {
    const port = await freePort();
    const publisher = await Publisher.connect(config, { log });
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    for (let i = 0; i < 5; i++) await publisher.publish('work', { type: 'flaky', args: ['ok', `m-${i}`], tenant: 'acme' });
    for (let i = 0; i < 2; i++) await publisher.publish('work', { type: 'flaky', args: ['fatal', `f-${i}`], tenant: 'acme', traceparent });
    await publisher.close();

    const stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--http-port', String(port), '--config', file], { AMQP_URL });
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitFor('ready', async () => (await fetch(`${base}/readyz`)).status === 200);
      await waitFor(
        'seven jobs settled',
        async () => (await raw.count(names.queue('done', 'acme'))) === 5 && (await raw.count(names.deadQueue('work', 'acme'))) === 2,
      );
      expect((await fetch(`${base}/healthz`)).status).to.equal(200);
      const text = await waitFor('the acks counted', async () => {
        const t = await (await fetch(`${base}/metrics`)).text();
        return sample(t, 'stagecoach_acks_total', { tenant: 'acme' }) === 7 && t;
      });
      const labels = { stage: 'flaky', queue: 'work', tenant: 'acme' };
      expect(sample(text, 'stagecoach_jobs_consumed_total', labels)).to.equal(7);
      expect(sample(text, 'stagecoach_jobs_completed_total', labels)).to.equal(5);
      expect(sample(text, 'stagecoach_jobs_failed_total', { ...labels, error_type: 'NonRetryableError' })).to.equal(2);
      expect(sample(text, 'stagecoach_jobs_dead_lettered_total', labels)).to.equal(2);
      expect(sample(text, 'stagecoach_jobs_retried_total', labels)).to.equal(0);
      expect(sample(text, 'stagecoach_jobs_published_total', { ...labels, output: 'done' })).to.equal(5);
      expect(sample(text, 'stagecoach_handler_duration_seconds_count', { ...labels, outcome: 'completed' })).to.equal(5);
      // Depths are read in the background every 15 s (QueueDepthCache): one reading after the jobs left shows 0.
      await waitFor(
        'the depth read as 0',
        async () =>
          sample(await (await fetch(`${base}/metrics`)).text(), 'stagecoach_queue_depth', {
            physical_queue: names.queue('work', 'acme'),
          }) === 0,
        25_000,
      );
      expect(text).to.match(/^stagecoach_connection_up 1$/m);
    } finally {
      stage.kill('SIGTERM');
    }
    const exit = await finished(stage, 15000, 'run flaky');
    expect(exit.code).to.equal(0);
    const deadLine = exit.stderr
      .split('\n')
      .filter((l) => l.includes('"job dead-lettered"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)[0];
    expect(deadLine).to.include({
      stage: 'flaky',
      tenant: 'acme',
      job_type: 'flaky',
      attempt: 1,
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    });
    expect(deadLine.job_id).to.be.a('string');
  });

  it('retries an unreachable broker at start-up with a clear log line, and says so on /readyz', async () => {
    const port = await freePort();
    const stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--http-port', String(port), '--config', file], {
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:1/',
    });
    try {
      await waitFor('a retry log line', () => stage.err.includes('cannot reach the broker at amqp://guest:***@127.0.0.1:1/'));
      const ready = await waitFor('the health server', async () => fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined));
      expect(ready.status).to.equal(503);
      expect(await ready.json()).to.deep.equal({ ready: false, reason: 'not connected to the broker' });
    } finally {
      stage.kill('SIGTERM');
    }
    expect((await finished(stage, 15000, 'run flaky')).code).to.equal(0);
  });
});
