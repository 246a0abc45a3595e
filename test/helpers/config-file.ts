import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { teardown } from '../../src/testing/test-config.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import { syncQueueSettings } from '../../src/plan/queue-settings.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { mergeTopologies, provisionTopology, stageDeclaredTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { REPO_ROOT } from './cli.js';
import { AMQP_URL, RawBroker } from './raw-broker.js';

/** The compiled failure-stages fixture, for configuration files the CLI loads. */
export const FAILURE_STAGES_MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/failure-stages.js');

export interface ConfigFile {
  dir: string;
  file: string;
  config: CompiledConfig;
  names: BrokerNames;
  /** A plain client to inspect the broker with. */
  raw: RawBroker;
  /** Closes `raw`, deletes the topology of `stages` and the directory. */
  remove(): Promise<void>;
}

/**
 * A configuration file in a fresh directory, with a unique prefix and non-durable topology
 * (unless `settings` say otherwise), for tests that run the command line; the topology of
 * `stages` (what `provision` and the stages declare) is on the broker at `url` (the file's broker unless the processes get
 * `AMQP_URL`), with the queue settings when that is the shared broker (users are left to the
 * tests of `provision`).
 */
export async function writeConfigFile(
  settings: RawConfig,
  stages: readonly StageMetadata[],
  name = 'stagecoach',
  url = AMQP_URL,
): Promise<ConfigFile> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `stagecoach-${name}-`));
  const file = path.join(dir, 'stagecoach.json');
  await writeFile(file, JSON.stringify({ prefix: `test-${randomBytes(4).toString('hex')}`, durable: false, ...settings }));
  const config = await loadConfig(file, { AMQP_URL: url });
  // What `provision` declares and what the stages declare at start-up (their suspect queues):
  // tests look at the queues of stages they start later, or in other processes.
  const topology = mergeTopologies(provisionTopology(config, stages), stageDeclaredTopology(config, stages));
  await declareTopologyOnce(config, topology, createLogger({}, 'error'));
  // The queue settings through the shared broker's management API; a private node (broker-node.ts) runs no plugins.
  if (url === AMQP_URL) await syncQueueSettings(config, stages, new ManagementClient(config.broker.management), { removeStale: false });
  const raw = await RawBroker.connect(config.broker.url);
  return {
    dir,
    file,
    config,
    names: new BrokerNames(config.prefix),
    raw,
    remove: async () => {
      try {
        // A connection the broker already closed must not keep the topology and policies behind.
        await raw.close().catch(() => undefined);
        await teardown(config, stages);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
