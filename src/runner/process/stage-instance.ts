import type { CompiledConfig } from '../../config/config.types.js';
import { queueFor } from '../../config/queue-resolver.js';
import type { LoadedStage } from '../../stage/stage-loader.js';

/** One stage instance of a process: a stage, for a tenant (tenant-scoped input) and a variant queue of it. */
export interface StageInstance {
  stage: LoadedStage;
  tenant?: string;
  variant?: string;
}

/**
 * Every instance `dev` runs: a shared stage once; a tenant-scoped one per tenant, plus one per
 * variant queue of its input.
 */
export function devInstances(config: CompiledConfig, stages: readonly LoadedStage[]): StageInstance[] {
  const instances: StageInstance[] = [];
  for (const stage of stages) {
    const input = queueFor(config, stage.metadata.input);
    if (input.scope === 'shared') {
      instances.push({ stage });
      continue;
    }
    for (const tenant of config.tenants) {
      instances.push({ stage, tenant });
      for (const variant of Object.keys(input.variants?.values ?? {})) instances.push({ stage, tenant, variant });
    }
  }
  return instances;
}
