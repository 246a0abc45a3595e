import { declareTopologyOnce } from '../../broker/declare-topology.js';
import { loadConfig } from '../../config/load-config.js';
import { createLogger } from '../../logging/logger.js';
import { ManagementApi } from '../../security/management-api.js';
import { provisionBrokerUsers } from '../../security/tenant-users.js';
import { loadAllStages, loadStage } from '../../stage/stage-loader.js';
import { provisionTopology, stageTopology } from '../../topology/build-topology.js';
import type { Topology } from '../../topology/topology.types.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/**
 * `stagecoach provision [--tenant T]`. With `security.tenantUsers`, also the broker users of the
 * tenant(s) and the internal user, with their permissions (passwords: `stagecoach credentials`).
 */
export async function provision(opts: { tenant?: string; config?: string }): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const stages = await loadAllStages(config);
  const topology = provisionTopology(
    config,
    stages.map((s) => s.metadata),
    tenant,
  );
  const log = createLogger({ service: 'stagecoach', command: 'provision' });
  await declareTopologyOnce(config, topology, log);
  process.stdout.write(
    `declared ${topology.exchanges.length} exchanges, ${topology.queues.length} queues, ${topology.bindings.length} bindings\n`,
  );
  if (config.security.tenantUsers) {
    const users = await provisionBrokerUsers(
      config,
      new ManagementApi(config.broker.management),
      tenant === undefined ? config.tenants : [tenant],
    );
    log.info('broker users provisioned', { users });
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
