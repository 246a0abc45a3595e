import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { devProvisioning } from '../../src/cli/dev-provisioning.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { DevProcess } from '../../src/runner/dev-process.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { pooled } from '../fixtures/pooled-stages.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'dev' }, 'error');
const TENANTS = 1000;
const PICKED = 20;
/** Publisher, suspects, a work channel per 100 tenants, the process's own (events, control, flags...): 18 measured. */
const MAX_CHANNELS = 30;

interface ListedConnection {
  name: string;
  channels?: number;
  client_properties?: { connection_name?: string };
}

/**
 * The broker's connections of `what` for `prefix` (stagecoach names them `<what> [<prefix>]`), by
 * the management API. Named, not all of the prefix: a closed publisher's stays listed a while.
 */
async function connectionsOf(config: CompiledConfig, what: string): Promise<ListedConnection[]> {
  const url = new URL(config.broker.management);
  const auth = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
  const response = await fetch(new URL('api/connections?columns=name,channels,client_properties', url.origin + url.pathname), {
    headers: { authorization: auth },
  });
  if (!response.ok) throw new Error(`GET /api/connections: ${response.status}`);
  const listed = (await response.json()) as ListedConnection[];
  return listed.filter((c) => c.client_properties?.connection_name === `${what} [${config.prefix}]`);
}

describe('stagecoach dev at a thousand tenants (DevProcess)', function () {
  this.timeout(90_000);
  let config: CompiledConfig;
  let dev: DevProcess | undefined;

  before(() => pooled.reset());

  after(async () => {
    await dev?.stop(5000);
    if (config !== undefined) await deletePrefix(config.broker.url, config.broker.management, config.prefix);
  });

  it('serves every tenant of a tenant-scoped stage from one pooled group: one connection, channels not per tenant', async () => {
    const tenants = Array.from({ length: TENANTS }, (_, i) => `t${String(i).padStart(4, '0')}`);
    config = withTestConfig(
      { tenants, stages: { sleeper: { module: './pooled-stages.js', concurrency: 8 } } },
      path.join(here, '../fixtures/config.json'),
    );
    const stages = await loadAllStages(config);
    dev = new DevProcess(config, stages, log);
    await dev.start(
      devProvisioning(
        config,
        stages.map((stage) => stage.metadata),
        log,
      ),
    );
    expect(dev.readiness()).to.deep.equal({ ready: true });
    expect(dev.groups).to.have.length(1);
    expect(dev.tenants).to.have.length(TENANTS);

    const picked = [...tenants].sort(() => Math.random() - 0.5).slice(0, PICKED);
    const publisher = await Publisher.connect(config, { log });
    try {
      await Promise.all(picked.map((tenant) => publisher.publish('naps', { type: 'nap', args: [1], tenant })));
    } finally {
      await publisher.close();
    }
    await waitFor(`a job of each of ${PICKED} tenants run`, () => pooled.runs.length === PICKED, 30_000);
    expect(pooled.runs.map((run) => run.tenant).sort()).to.deep.equal([...picked].sort());

    // The management API's counts lag by its statistics interval (5 s by default), and the start
    // declares on 16 channels more for a moment: the count is read once it has settled. A runner
    // per tenant held about 3 each (1,000 tenants: `No channels left to allocate` at 2,047).
    let connections: ListedConnection[] = [];
    await waitFor(
      `the dev process's connection listed with at most ${MAX_CHANNELS} channels`,
      async () => {
        connections = await connectionsOf(config, 'stagecoach sleeper');
        return connections.length === 1 && (connections[0].channels ?? 0) > 0 && (connections[0].channels ?? 0) <= MAX_CHANNELS;
      },
      30_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; listed: ${JSON.stringify(connections)}`);
    });
    expect(connections, 'one connection for the stage, not one per tenant').to.have.length(1);
    expect(connections[0].channels).to.be.within(1, MAX_CHANNELS);
  });
});
