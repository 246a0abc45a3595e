import type { CompiledConfig, CompiledStageConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { ConfigError } from '../errors/errors.js';
import type { LoadedStage } from '../stage/stage-loader.js';
import { stageTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import type { Topology } from '../topology/topology.types.js';
import { checkTenantSlug } from '../util/tenant-slug.js';
import type { InputKind } from './channels/delivery.js';

/** What a runner consumes and where, checked against the configuration. */
export interface StageInput {
  /** `stage`, `stage/tenant` or `stage/tenant/variant`. */
  name: string;
  settings: CompiledStageConfig;
  input: ResolvedQueueConfig;
  /** The physical queues: its input (`main`), and the `due`, `suspect` and `dead` companions. */
  queues: Record<InputKind, string> & { dead: string };
  /** What it declares (or checks) at start and when healing. */
  topology: Topology;
}

/**
 * Resolves a stage's input for one tenant and variant, and refuses what cannot run: an unknown
 * stage, a tenant-scoped input without a tenant (or a shared one with a tenant), an unknown
 * variant, a tenant that is not a slug.
 * @throws ConfigError
 */
export function resolveStageInput(config: CompiledConfig, stage: LoadedStage, tenant?: string, variant?: string): StageInput {
  const meta = stage.metadata;
  const settings = config.stages.get(meta.name);
  if (!settings) throw new ConfigError(config.source, `stages.${meta.name}`, 'a configured stage');
  // Library users reach here without the command line's check: the tenant and variant become
  // queue names, where a dotted tenant would name another tenant's variant queue.
  if (tenant !== undefined) checkTenantSlug(tenant, `stage "${meta.name}": tenant`);
  const input = queueFor(config, meta.input, `stage "${meta.name}"`);
  if (input.scope === 'tenant' && tenant === undefined) {
    throw new ConfigError(
      config.source,
      `queues.${meta.input}`,
      `a tenant for stage "${meta.name}": its input is tenant-scoped (use --tenant)`,
    );
  }
  if (input.scope === 'shared' && tenant !== undefined) {
    throw new ConfigError(config.source, `queues.${meta.input}`, `no --tenant for stage "${meta.name}": its input is shared`);
  }
  // Own keys only: `--variant constructor` must not find Object.prototype.constructor.
  if (variant !== undefined && !Object.hasOwn(input.variants?.values ?? {}, variant)) {
    const known = Object.keys(input.variants?.values ?? {}).join(', ') || 'none';
    throw new ConfigError(config.source, `queues.${meta.input}.variants.values.${variant}`, `a configured variant (known: ${known})`);
  }
  const names = new BrokerNames(config.prefix);
  return {
    name: [meta.name, tenant, variant].filter((part) => part !== undefined).join('/'),
    settings,
    input,
    queues: {
      main: names.queue(meta.input, tenant, variant),
      due: names.dueQueue(meta.input, tenant, variant),
      suspect: names.suspectQueue(meta.input, tenant, variant),
      dead: names.deadQueue(meta.input, tenant),
    },
    topology: stageTopology(config, meta, tenant),
  };
}
