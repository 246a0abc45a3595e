import { publishControl } from '../../control/send-control.js';
import { openConnection } from '../../broker/amqp-connection.js';
import { checkSameBroker } from '../../broker/same-broker.js';
import type { CompiledConfig } from '../../config/config.types.js';
import { loadConfig } from '../../config/load-config.js';
import { withCommandEvents } from '../../events/command-events.js';
import { createLogger } from '../../logging/logger.js';
import { applyPlan } from '../../plan/apply-plan.js';
import { readInventory } from '../../plan/broker-inventory.js';
import { desiredState } from '../../plan/desired-state.js';
import { formatPlan } from '../../plan/format-plan.js';
import { planChanges, type Plan } from '../../plan/plan.js';
import { ManagementClient, managementClientOf } from '../../broker-management/management-client.js';
import { loadAllStages } from '../../stage/stage-loader.js';
import type { StageEndpoints } from '../../topology/topology.types.js';
import { EXIT_DIFFERS, EXIT_OK } from '../exit-codes.js';

/**
 * `stagecoach plan [--json]`: the difference between the configuration (and the stages' inputs
 * and outputs, as `provision` declares them) and the broker. Exit 0 when nothing differs,
 * EXIT_DIFFERS (3) when something does.
 */
export async function plan(opts: { json?: boolean; config?: string }): Promise<number> {
  const { config, stages, api } = await setUp(opts.config);
  const current = await readPlan(config, stages, api);
  process.stdout.write(opts.json ? `${JSON.stringify(current, null, 2)}\n` : formatPlan(current));
  return current.changes.length === 0 ? EXIT_OK : EXIT_DIFFERS;
}

/**
 * `stagecoach apply [--json]`: carries out the plan's additions, changes and removals (never a
 * queue's or a job's), then plans again. Exit 0 when nothing differs afterwards, EXIT_DIFFERS
 * (3) when what remains needs the operator (`recreate`, `retire`).
 */
export async function apply(opts: { json?: boolean; config?: string }): Promise<number> {
  const { config, stages, api } = await setUp(opts.config);
  const log = createLogger({ service: 'stagecoach', command: 'apply' });
  const before = await readPlan(config, stages, api);
  const connection = await openConnection(config, log, 'stagecoach-apply');
  let result;
  try {
    result = await withCommandEvents(config, 'apply', log, (onEvent) => applyPlan(config, before, connection, api, log, onEvent));
    // Flow limits are no policy the plan can compare: running stages read the file again and
    // resize their tokens to it (docs/flow-control.md).
    await publishControl(connection, config, { command: 'limits' }).catch((err: Error) =>
      log.warn('running stages not told to read the flow limits again: they take them at their next start', { err: err.message }),
    );
  } finally {
    await connection.close().catch(() => undefined);
  }
  const after = await readPlan(config, stages, api);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ applied: result.applied, remaining: after }, null, 2)}\n`);
  } else {
    const lines = result.applied.map(
      (change) => `  ${change.action.padEnd(8)} ${change.kind} ${change.name}${change.detail ? `: ${change.detail}` : ''}`,
    );
    process.stdout.write(
      `applied ${result.applied.length} change${result.applied.length === 1 ? '' : 's'}${lines.length > 0 ? ':' : ''}\n`,
    );
    if (lines.length > 0) process.stdout.write(`${lines.join('\n')}\n`);
    process.stdout.write(after.changes.length === 0 ? 'nothing differs\n' : `left to the operator:\n${formatPlan(after)}`);
  }
  return after.changes.length === 0 ? EXIT_OK : EXIT_DIFFERS;
}

async function setUp(file: string | undefined): Promise<{ config: CompiledConfig; stages: StageEndpoints[]; api: ManagementClient }> {
  const config = await loadConfig(file);
  const stages = (await loadAllStages(config)).map((stage) => stage.metadata);
  const api = managementClientOf(config);
  // Compared with, and changed on, the broker the AMQP URLs name: never another one.
  await checkSameBroker(config, api, createLogger({ service: 'stagecoach', command: 'plan' }));
  return { config, stages, api };
}

async function readPlan(config: CompiledConfig, stages: readonly StageEndpoints[], api: ManagementClient): Promise<Plan> {
  return planChanges(desiredState(config, stages), await readInventory(config, api));
}
