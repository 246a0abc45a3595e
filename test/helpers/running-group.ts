import type { CompiledConfig } from '../../src/config/config.types.js';
import type { Logger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { devProvisioning } from '../../src/cli/dev-provisioning.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { RawBroker } from './raw-broker.js';

export interface RunningGroup {
  names: BrokerNames;
  stages: LoadedStage[];
  group: StageGroup;
  /** A plain client to inspect queues with. */
  raw: RawBroker;
  publisher: Publisher;
  /** Stops the group, closes the clients and deletes the configuration's topology. */
  stop(): Promise<void>;
}

/**
 * Loads the configured stages, starts a provisioning `StageGroup` running the given instances
 * (stage name, tenant), and opens a publisher and an inspecting client.
 */
export async function startGroup(
  config: CompiledConfig,
  instances: Array<{ stage: string; tenant?: string }>,
  log: Logger,
): Promise<RunningGroup> {
  const stages = await loadAllStages(config);
  const byName = (name: string): LoadedStage => {
    const stage = stages.find((s) => s.metadata.name === name);
    if (!stage) throw new Error(`no stage "${name}" in the test configuration`);
    return stage;
  };
  const running = instances.map(({ stage, tenant }) => ({ stage: byName(stage), ...(tenant === undefined ? {} : { tenant }) }));
  const group = new StageGroup(config, running, log);
  // What `dev` provisions: the topology on every connection, the queue settings once.
  await group.start(
    devProvisioning(
      config,
      running.map((i) => i.stage.metadata),
      log,
    ),
  );
  const raw = await RawBroker.connect(config.broker.url);
  const publisher = await Publisher.connect(config, { log });
  return {
    names: new BrokerNames(config.prefix),
    stages,
    group,
    raw,
    publisher,
    stop: async () => {
      await publisher.close();
      await group.stop();
      await raw.close();
      await teardown(
        config,
        stages.map((s) => s.metadata),
      );
    },
  };
}
