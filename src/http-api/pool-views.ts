import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { tenantShare } from '../config/tenant-share.js';
import type { StageEndpoints } from '../topology/topology.types.js';
import { previewShare } from './share-preview.js';

/** One tenant's place in a pool: its configured share and what the share gives it while every tenant has work. */
export interface PoolTenantView {
  tenant_id: string;
  weight: number;
  min_concurrency: number;
  max_concurrency: number | null;
  /** Slots it holds on average while every tenant of the pool has work and jobs take equally long. */
  busy_slots: number;
  /** Its part of the jobs started then (0-1). */
  busy_dispatch_ratio: number;
}

/**
 * A pool (ojs-fair-scheduling 6.1) as stagecoach has it: the pooled process of one stage
 * (`run <stage> --all-tenants`), whose `concurrency` slots its tenants share by weight, with
 * their minimums and caps (docs/pooled-workers.md). Its queues are the stage's input queue of
 * each tenant; `weights` are the tenants', not the queues'.
 */
export interface PoolView {
  /** Beside the queue pools of HTTP workers (`kind: "queues"`, queue-pool.ts). */
  kind: 'stage';
  name: string;
  stage: string;
  /** The logical queue the stage reads: one physical queue per tenant. */
  queues: string[];
  concurrency: number;
  /** Deliveries the broker sends ahead per tenant. */
  tenant_prefetch: number;
  strategy: 'weighted';
  /** By tenant: its `tenants[].weight`. */
  weights: Record<string, number>;
  tenants: PoolTenantView[];
}

/** Most tenants one pool view lists (a configuration may name 10,000): the rest have the default share. */
export const MAX_POOL_TENANTS = 1000;

/**
 * The pools of a configuration: each stage reading a tenant-scoped queue, by name. A stage
 * reading a shared queue runs no tenant share, so it is no pool. The tenants are the configured
 * ones (up to MAX_POOL_TENANTS, in configuration order); a tenant provisioned without being
 * configured joins an `--all-tenants` process with weight 1 and no minimum or cap.
 */
export function poolsOf(config: CompiledConfig, stages: readonly StageEndpoints[]): PoolView[] {
  return stages.flatMap((endpoints) => {
    const stage = config.stages.get(endpoints.name);
    if (stage === undefined || queueFor(config, endpoints.input).scope !== 'tenant') return [];
    return [poolView(config, endpoints, stage.concurrency, stage.tenantPrefetch)];
  });
}

function poolView(config: CompiledConfig, endpoints: StageEndpoints, concurrency: number, tenantPrefetch: number): PoolView {
  const seats = config.tenants.slice(0, MAX_POOL_TENANTS).map((tenant) => ({ tenant, ...tenantShare(config, tenant) }));
  const preview = previewShare(concurrency, seats);
  return {
    kind: 'stage',
    name: endpoints.name,
    stage: endpoints.name,
    queues: [endpoints.input],
    concurrency,
    tenant_prefetch: tenantPrefetch,
    strategy: 'weighted',
    weights: Object.fromEntries(seats.map((seat) => [seat.tenant, seat.weight])),
    tenants: seats.map((seat) => ({
      tenant_id: seat.tenant,
      weight: seat.weight,
      min_concurrency: seat.minConcurrency,
      max_concurrency: seat.maxConcurrency ?? null,
      busy_slots: preview.get(seat.tenant)?.slots ?? 0,
      busy_dispatch_ratio: preview.get(seat.tenant)?.ratio ?? 0,
    })),
  };
}

/** The pool view as a tenant's token may see it: its own tenant's place only. */
export function confinePool(pool: PoolView, tenant: string | undefined): PoolView {
  if (tenant === undefined) return pool;
  const own = pool.tenants.filter((entry) => entry.tenant_id === tenant);
  return { ...pool, weights: Object.fromEntries(own.map((entry) => [entry.tenant_id, entry.weight])), tenants: own };
}
