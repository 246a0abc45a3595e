import type { AdminEventSink } from '../../events/admin-events.js';
import type { StageMetrics } from '../../observability/stage-metrics.js';
import type { PayloadOffloader } from '../../payload/payload-offloader.js';
import type { Middleware } from '../../stage/middleware/middleware.types.js';
import type { StageEndpoints } from '../../topology/topology.types.js';
import type { PooledGroupOptions } from './pooled-roster.js';

export interface StageGroupOptions {
  /** Shared with other groups or a health server; a new registry by default. */
  metrics?: StageMetrics;
  /**
   * Refuse to start for a tenant that is neither in the configuration's `tenants` nor provisioned
   * on the broker (its tenant exchange exists): `start()` fails with a TenantError before
   * anything is declared, instead of a stage creating that tenant's queues and waiting on them for
   * ever. `stagecoach run` sets it. @defaultValue false
   */
  knownTenantsOnly?: boolean;
  /**
   * One process serving one stage for many tenants (`run --tenants` / `--all-tenants`): every
   * instance is the same stage (and variant), and the runners share channels and the stage's
   * `concurrency` slots by weight (TenantPool). Tenants can be added and removed while it runs.
   */
  pooled?: PooledGroupOptions;
  /**
   * Payload offloading to share; by default the configured store, which `stop()` closes. `false`
   * turns it off: jobs go inline whatever their size, and a job sent by reference fails (benches).
   */
  payloads?: PayloadOffloader | false;
  /**
   * Process-wide middleware (docs/middleware.md), for every stage of the group and outside each
   * stage's own (`@Stage({ middleware })`): `execution` wraps every handler (on the main thread,
   * around the worker thread of a stage with `threads`), `enqueue` runs on every `ctx.emit()`
   * before the stage's. @defaultValue none
   */
  middleware?: Middleware;
}

/**
 * What `start()` provisions beyond the topology (`stagecoach dev` passes one, built on the
 * command line: src/cli/dev-provisioning.ts).
 */
export interface StageProvisioning {
  /**
   * Once, on the first connection (after the tenant check), before anything attaches. `events`
   * publishes OJS events as the group, on its connection.
   */
  beforeAttach(events: AdminEventSink): Promise<void>;
  /**
   * The stages whose queues (of every configured tenant) the group declares on every connection.
   * `dev` runs its stages in several groups and has one of them declare for all.
   * @defaultValue the group's own
   */
  stages?: readonly StageEndpoints[];
}
