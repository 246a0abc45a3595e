import type { CompiledConfig } from '../config/config.types.js';
import type { AdminEventSink } from '../events/admin-events.js';
import type { Logger } from '../logging/logger.js';
import { applyDeclaredQueueSettings } from '../plan/declared-queue-settings.js';
import type { StageProvisioning } from '../runner/stage-group.js';
import type { StageEndpoints } from '../topology/topology.types.js';

/**
 * What `stagecoach dev` provisions around its group's start, an operator's action done from the
 * command line rather than by the runtime: every queue of every configured tenant declared (by the
 * group, on each connection, since a broker restarted without durable queues forgets them) and,
 * once, before the runners attach, the queue settings (policies) of those queues. The settings
 * live on the broker, not in a connection, and go through the management API, which local
 * development may lack: then they are not in force, and `dev` says so and runs anyway. Each policy
 * put is announced (`queue.config_updated`) as the stage process.
 */
export function devProvisioning(config: CompiledConfig, stages: readonly StageEndpoints[], log: Logger): StageProvisioning {
  return {
    stages,
    beforeAttach: (onEvent: AdminEventSink) => applyDevSettings(config, stages, log, onEvent),
  };
}

async function applyDevSettings(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  log: Logger,
  onEvent: AdminEventSink,
): Promise<void> {
  await applyDeclaredQueueSettings(config, stages, undefined, log, onEvent);
}
