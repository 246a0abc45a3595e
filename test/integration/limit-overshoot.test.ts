import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { seen } from '../fixtures/failure-stages.js';
import { BrokerNode, brokerNodeUnsupported, configOnNode } from '../helpers/broker-node.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'limit-overshoot' }, (process.env.LOG_LEVEL as 'error' | undefined) ?? 'error');

const LIMIT = 3;

/** The local port of a group's connection (amqplib's socket), to find it on the broker. */
function localPort(group: StageGroup): number {
  const internal = group as unknown as { connection: { current: { connection: { stream: { localPort: number } } } } };
  return internal.connection.current.connection.stream.localPort;
}

/**
 * How long a concurrency limit overshoots when the broker drops one process's connection
 * (docs/flow-control.md): its tokens return at once, another process takes them, and the
 * dropped process's handlers, told through `ctx.signal`, end moments later. Measured here
 * with handlers that honour the signal.
 */
describe('a concurrency limit when the broker drops one process (private broker node)', function () {
  this.timeout(180_000);
  let node: BrokerNode | undefined;
  let running: RunningGroup | undefined;
  let second: StageGroup | undefined;

  before(async function () {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    node = await BrokerNode.start({ name: `stagecoach-overshoot-${randomBytes(3).toString('hex')}` });
  });

  after(async () => {
    await second?.stop().catch(() => undefined);
    await running?.stop().catch(() => undefined);
    await node?.remove();
  });

  it('overshoots for no longer than the dropped handlers take to see their signal', async () => {
    const config = configOnNode(
      node as BrokerNode,
      {
        tenants: ['acme'],
        broker: { reconnect: { initialDelay: 0.2, maxDelay: 1 } },
        queues: { work: { concurrency: LIMIT } },
        stages: { flaky: { module: './failure-stages.js', concurrency: LIMIT } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    const stage = (await loadAllStages(config)).find((s) => s.metadata.name === 'flaky');
    second = new StageGroup(config, [{ stage: stage as NonNullable<typeof stage>, tenant: 'acme' }], log);
    await second.start();
    const { group, publisher } = running;

    const run = `o${Date.now()}`;
    const keys = Array.from({ length: 4 * LIMIT }, (_, i) => `${run}-${i}`);
    for (const key of keys) await publisher.publish('work', { type: 'flaky', args: ['sleep', key], tenant: 'acme' });
    // Every token held, the rest waiting: the process holding most of them is dropped.
    const groups = [group, second];
    await waitFor('the limit reached', () => groups.reduce((sum, g) => sum + g.runners[0].inFlight, 0) === LIMIT, 20_000);
    const holder = groups.reduce((a, b) => (b.runners[0].inFlight > a.runners[0].inFlight ? b : a));
    const port = localPort(holder);
    const listed = await (node as BrokerNode).ctl(['list_connections', 'pid', 'peer_port', '--no-table-headers', '--silent']);
    const pid = listed
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .find(([, peer]) => Number(peer) === port)?.[0];
    expect(pid, `the holder's connection (port ${port}) in:\n${listed}`).to.be.a('string');
    const dropped = Date.now();
    await (node as BrokerNode).ctl(['close_connection', pid as string, 'test: dropped']);
    await waitFor(
      'every job run',
      () => keys.every((key) => (seen.get(key) ?? []).some((entry) => entry.ended !== undefined && !entry.aborted)),
      60_000,
      100,
    );

    // Running at once, from every start and end of the runs.
    const edges = keys
      .flatMap((key) => seen.get(key) ?? [])
      .flatMap((entry) => [
        { at: entry.at, step: 1 },
        { at: entry.ended ?? Infinity, step: -1 },
      ])
      .sort((a, b) => a.at - b.at || a.step - b.step);
    let now = 0;
    let most = 0;
    let over = 0;
    let since = 0;
    for (const edge of edges) {
      if (now > LIMIT) over += edge.at - since;
      now += edge.step;
      since = edge.at;
      most = Math.max(most, now);
    }
    console.log(
      `      dropped at +0: most running at once ${most} (limit ${LIMIT}), over the limit for ${over} ms in all (${Date.now() - dropped} ms watched)`,
    );
    // A loaded machine delays the abort a little: the bound, not the figure.
    expect(over, 'ms over the limit').to.be.at.most(1000);
  });
});
