import { expect } from 'chai';
import { freePorts } from '../helpers/broker-node.js';
import { spawnCli } from '../helpers/cli.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait-for.js';

const STALL_SECONDS = 3;
/** What readiness may take beyond the stall timeout: a tick, a probe's third, a loaded machine. */
const READY_MARGIN_MS = 3000;
const SCRAPE_BOUND_MS = 500;

/**
 * A connection that stops passing packets without being reset (a TCP proxy that black-holes
 * it): the heartbeat would notice after two to three heartbeats (minutes); readiness must say so
 * within `broker.stallTimeout`, and `/metrics` must keep answering at once meanwhile.
 */
describe('a black-holed broker connection (TCP proxy)', function () {
  this.timeout(60_000);
  const stages = [{ name: 'flaky', input: 'work', outputs: ['done'] }];
  let project: ConfigFile;
  let proxy: TcpProxy;
  let stage: ReturnType<typeof spawnCli> | undefined;

  before(async () => {
    project = await writeConfigFile(
      { tenants: ['acme'], broker: { stallTimeout: STALL_SECONDS }, stages: { flaky: { module: FAILURE_STAGES_MODULE } } },
      stages,
      'stall',
    );
    const broker = new URL(AMQP_URL);
    proxy = await TcpProxy.start({ host: broker.hostname, port: Number(broker.port || 5672) });
  });

  after(async () => {
    if (stage && stage.exitCode === null && stage.signalCode === null) stage.kill('SIGKILL');
    await proxy?.close();
    await project?.remove();
  });

  it('turns /readyz 503 within the stall timeout, while /metrics answers at once', async () => {
    const [port] = await freePorts(1);
    const url = new URL(AMQP_URL);
    url.port = String(proxy.port);
    stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--config', project.file], {
      AMQP_URL: url.toString(),
      STAGECOACH_HTTP_PORT: String(port),
    });
    const http = (path: string): Promise<Response> => fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(20_000) });
    await waitFor('the stage ready', async () => (await http('/readyz')).status === 200, 20_000);
    // A reading of the depths made before the cut: the scrape still shows them (they are this recent).
    await waitFor('a queue depth sampled', async () => /^stagecoach_queue_depth\{/m.test(await (await http('/metrics')).text()), 20_000);

    proxy.blackHole();
    const cut = Date.now();
    const scrapes: number[] = [];
    const unready = await waitFor(
      'readiness to fail',
      async () => {
        const began = Date.now();
        const metrics = await http('/metrics');
        await metrics.text();
        scrapes.push(Date.now() - began);
        const ready = await http('/readyz');
        return ready.status === 503 ? ((await ready.json()) as { reason: string }) : undefined;
      },
      STALL_SECONDS * 1000 + READY_MARGIN_MS + 30_000,
      200,
    );
    const took = Date.now() - cut;
    expect(took, `503 after ${took} ms`).to.be.below(STALL_SECONDS * 1000 + READY_MARGIN_MS);
    expect(unready.reason).to.match(/no answer from the broker/);
    expect(Math.max(...scrapes), `scrapes took ${scrapes.join(', ')} ms`).to.be.below(SCRAPE_BOUND_MS);
    expect(stage.exitCode, stage.err).to.equal(null);
  });
});
