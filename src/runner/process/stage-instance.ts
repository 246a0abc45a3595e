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
 * variant queue of its input. In one StageGroup, each is a runner with channels of its own: a
 * few hundred tenants at most; `dev` itself groups them by {@link devGroupPlans}.
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

/** One group of a `dev` process: the shared stages together, or one tenant-scoped stage (and variant) for every tenant. */
export interface DevGroupPlan {
  instances: StageInstance[];
  /** A tenant-scoped stage: the group is pooled (its tenants share channels and slots). */
  pooled?: { stage: LoadedStage; variant?: string };
}

/**
 * The groups `dev` runs: every stage reading a shared queue in one group, as before; each stage
 * of tenant-scoped queues, and each variant queue of it, in a pooled group of every configured
 * tenant. A runner per tenant on channels of its own had a thousand tenants exhaust a
 * connection's 2,047 channels; a pool's channels grow by one per hundred tenants. A stage with
 * no tenant to serve has no group.
 */
export function devGroupPlans(config: CompiledConfig, stages: readonly LoadedStage[]): DevGroupPlan[] {
  const shared: StageInstance[] = [];
  const plans: DevGroupPlan[] = [];
  for (const stage of stages) {
    const input = queueFor(config, stage.metadata.input);
    if (input.scope === 'shared') {
      shared.push({ stage });
      continue;
    }
    if (config.tenants.length === 0) continue;
    for (const variant of [undefined, ...Object.keys(input.variants?.values ?? {})]) {
      const which = variant === undefined ? {} : { variant };
      plans.push({ instances: config.tenants.map((tenant) => ({ stage, tenant, ...which })), pooled: { stage, ...which } });
    }
  }
  return shared.length === 0 ? plans : [{ instances: shared }, ...plans];
}
