import type { CompiledConfig } from '../config/config.types.js';
import { brokerUserGrants } from '../security/tenant-users.js';
import { provisionTopology, stageDeclaredTopology } from '../topology/build-topology.js';
import { queuePolicies } from '../topology/queue-policies.js';
import type { PolicySpec, StageEndpoints, Topology } from '../topology/topology.types.js';

/** What the broker should hold for a configuration: what `provision` makes for every configured tenant. */
export interface DesiredState {
  prefix: string;
  tenants: readonly string[];
  topology: Topology;
  /**
   * What the stages declare for themselves when they start (`suspect` companions, see
   * `stageDeclaredTopology`): `plan` neither adds it (a stage that never ran has none) nor
   * retires it, but one on the broker with other properties is still to recreate, since the
   * stage's own declaration would be refused.
   */
  stageDeclared: Topology;
  policies: PolicySpec[];
  /** Broker users `provision` manages (with `security.tenantUsers`), else empty. */
  users: string[];
  /**
   * Names under the prefix that other parts of stagecoach own and declare themselves: `plan`
   * neither adds nor retires them.
   */
  ignored: ReadonlySet<string>;
}

/**
 * The configuration's broker state, with the queues of the given stages' inputs and outputs (as
 * `provision` declares them).
 */
export function desiredState(config: CompiledConfig, stages: readonly StageEndpoints[]): DesiredState {
  return {
    prefix: config.prefix,
    tenants: config.tenants,
    topology: provisionTopology(config, stages),
    stageDeclared: stageDeclaredTopology(config, stages),
    policies: queuePolicies(config, stages),
    users: config.security.tenantUsers ? brokerUserGrants(config, config.tenants).map((grant) => grant.user) : [],
    // The queue states' marker exchanges are not configuration: plan reports them apart.
    ignored: new Set(),
  };
}
