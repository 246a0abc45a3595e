import type { CompiledConfig } from '../config/config.types.js';
import type { AdminEventSink } from '../events/admin-events.js';
import type { Logger } from '../logging/logger.js';
import { managementClientOf } from '../broker-management/management-client.js';
import type { StageEndpoints } from '../topology/topology.types.js';
import { syncQueueSettings } from './queue-settings.js';

/** How long a process that declares a queue waits for the management API before it goes on without. */
const SETTINGS_TIMEOUT_MS = 5000;

/**
 * Puts the settings (`max_size`, `overflow_policy`, `dead_letter_ttl`...: queue-policies.ts) of
 * the queues a process is about to declare, before it declares them, as `provision` would: a
 * queue first declared by a stage or a push is bounded from its first job. Best effort: the
 * settings go through the management API, which may be unreachable or refuse this process's user
 * (with `security.tenantUsers`, stages hold no management user and do not try: `provision` puts
 * them); then the queue runs without them until `stagecoach apply`, and a warning says so.
 * @param queues the logical queues concerned (the others' policies are left as they are); every
 *   queue of `stages` and the configuration when undefined.
 */
export async function applyDeclaredQueueSettings(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  queues: readonly string[] | undefined,
  log: Logger,
  onEvent?: AdminEventSink,
): Promise<void> {
  try {
    await syncQueueSettings(config, stages, managementClientOf(config, SETTINGS_TIMEOUT_MS), {
      removeStale: false,
      ...(queues === undefined ? {} : { queues }),
      log,
      ...(onEvent === undefined ? {} : { onEvent }),
    });
  } catch (err) {
    log.warn(
      'queue settings (max_size, overflow_policy, dead_letter_ttl...) not applied: run `stagecoach apply` once the management API answers',
      { queues, err: (err as Error).message },
    );
  }
}
