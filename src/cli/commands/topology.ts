import { loadConfig } from '../../config/load-config.js';
import { withCommandEvents } from '../../events/command-events.js';
import { createLogger } from '../../logging/logger.js';
import { provisionBroker } from '../../plan/provision-broker.js';
import { loadAllStages, loadStage } from '../../stage/stage-loader.js';
import { provisionTopology, stageTopology } from '../../topology/build-topology.js';
import type { Topology } from '../../topology/topology.types.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/**
 * `stagecoach provision [--tenant T]`: the topology, the queue settings (policies, through the
 * management API) and, with `security.tenantUsers`, the broker users of the tenant(s) and the
 * internal user with their permissions (passwords: `stagecoach credentials`).
 */
export async function provision(opts: { tenant?: string; config?: string }): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const stages = await loadAllStages(config);
  const log = createLogger({ service: 'stagecoach', command: 'provision' });
  const { topology, declared, settings, users } = await withCommandEvents(config, 'provision', log, (onEvent) =>
    provisionBroker(
      config,
      stages.map((s) => s.metadata),
      log,
      { onEvent, ...(tenant === undefined ? {} : { tenant }) },
    ),
  );
  process.stdout.write(
    `declared ${topology.exchanges.length} exchanges, ${topology.queues.length} queues, ${topology.bindings.length} bindings` +
      ` (missing or different before: ${declared.exchanges.length}, ${declared.queues.length}, ${declared.bindings.length})\n` +
      `queue settings: ${settings.put.length} policies set, ${settings.deleted.length} removed\n`,
  );
  if (config.security.tenantUsers) {
    process.stdout.write(`set the permissions of ${users.length} broker users (passwords: stagecoach credentials)\n`);
  }
  return EXIT_OK;
}

/** `stagecoach topology [--tenant T] [--stage S] [--json]`: no broker needed. */
export async function printTopology(opts: { tenant?: string; stage?: string; json?: boolean; config?: string }): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  let topology: Topology;
  if (opts.stage !== undefined) {
    topology = stageTopology(config, (await loadStage(config, opts.stage)).metadata, tenant);
  } else {
    topology = provisionTopology(
      config,
      (await loadAllStages(config)).map((s) => s.metadata),
      tenant,
    );
  }
  process.stdout.write(opts.json ? `${JSON.stringify(topology, null, 2)}\n` : formatTopology(topology));
  return EXIT_OK;
}

export function formatTopology(topology: Topology): string {
  const lines: string[] = ['exchanges:'];
  for (const e of topology.exchanges) {
    lines.push(`  ${e.name} (${e.type}${e.durable ? ', durable' : ''}${e.alternateExchange ? `, alternate ${e.alternateExchange}` : ''})`);
  }
  lines.push('queues:');
  for (const q of topology.queues) {
    const args = Object.entries(q.arguments).map(([k, v]) => `${k}=${String(v)}`);
    lines.push(`  ${q.name}${args.length ? ` [${args.join(', ')}]` : ''}`);
  }
  lines.push('bindings:');
  for (const b of topology.bindings) {
    const match = b.arguments ? ` ${JSON.stringify(b.arguments)}` : '';
    lines.push(`  ${b.source} -> ${b.destination}${b.routingKey ? ` key=${b.routingKey}` : ''}${match}`);
  }
  return `${lines.join('\n')}\n`;
}
