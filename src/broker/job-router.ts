import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { StagecoachError, TenantMismatchError, TenantRequiredError } from '../errors/errors.js';
import { toWire, type WireOptions } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import { identitiesOf } from '../security/broker-users.js';
import { BrokerNames } from '../topology/names.js';
import { matchesAny } from '../util/patterns.js';
import type { PublishChannel } from './confirm-publisher.js';

export interface Route {
  exchange: string;
  routingKey: string;
}

/**
 * Where a job enters the broker (DESIGN.md): tenant-scoped queues through the root headers
 * exchange with the tenant header, shared queues through `ojs.direct`; the routing key is
 * always the logical queue name.
 *
 * With `security.tenantUsers`, a tenant's producer or stage user may write neither the root
 * exchange (its header routing would let it claim any tenant) nor another tenant's exchange: it
 * publishes tenant-scoped jobs straight to `<prefix>.tenant.<T>`, where the root exchange would
 * have sent them (same queues, same routing by key). A job for another tenant is refused here
 * (TENANT_MISMATCH) rather than by the broker, which would close the channel. Trusted users
 * (operator, internal) keep the root exchange and its `unroutable` for unknown tenants.
 */
export function routeFor(config: CompiledConfig, job: Job): Route {
  const names = namesOf(config);
  const queue = queueFor(config, job.queue);
  if (!typeAllowed(queue.allowed_job_types, job.type)) {
    throw new StagecoachError(
      'JOB_TYPE_NOT_ALLOWED',
      `job type "${job.type}" is not allowed in queue "${job.queue}" (allowed: ${(queue.allowed_job_types ?? []).join(', ')})`,
    );
  }
  const tenantUsers = config.security.tenantUsers;
  if (queue.scope === 'shared') {
    if (tenantUsers) checkOwnTenant(config, job.tenant);
    return { exchange: names.direct, routingKey: job.queue };
  }
  if (job.tenant === undefined) throw new TenantRequiredError(job.queue);
  if (tenantUsers && !checkOwnTenant(config, job.tenant)) return { exchange: names.tenantExchange(job.tenant), routingKey: job.queue };
  return { exchange: names.root, routingKey: job.queue };
}

/**
 * A tenant user publishes for its own tenant only (a tenantless job included: its tenant would
 * be anyone's). @returns whether the publishing user is trusted (operator or internal).
 */
function checkOwnTenant(config: CompiledConfig, tenant: string | undefined): boolean {
  const identities = identitiesOf(config);
  if (identities.selfTrusted) return true;
  if (identities.selfTenant !== undefined && identities.selfTenant !== tenant) {
    throw new TenantMismatchError(
      tenant,
      identities.self,
      `broker user "${identities.self}" publishes for tenant "${identities.selfTenant}" only, not for ${tenant === undefined ? 'a job without a tenant' : `"${tenant}"`}`,
    );
  }
  return false;
}

/** Broker names per configuration, made once: routing runs for every emitted job. */
const brokerNames = new WeakMap<CompiledConfig, BrokerNames>();
function namesOf(config: CompiledConfig): BrokerNames {
  let names = brokerNames.get(config);
  if (names === undefined) brokerNames.set(config, (names = new BrokerNames(config.prefix)));
  return names;
}

/** OJS `allowed_job_types`: exact types, `*`, and `prefix.*` wildcards. */
export function typeAllowed(patterns: readonly string[] | undefined, type: string): boolean {
  return patterns === undefined || matchesAny(patterns, type);
}

/** Where emitted jobs go: the broker in production, a list in the in-memory harness. */
export interface JobSink {
  send(job: Job, wire?: Omit<WireOptions, 'tenantHeader'>): Promise<void>;
}

/** Publishes envelopes to their route and resolves when the broker confirmed them. */
export class JobRouter implements JobSink {
  constructor(
    private readonly config: CompiledConfig,
    private readonly publisher: PublishChannel,
  ) {}

  /** Not async on purpose: one promise per job on the hot path, the publisher's. */
  send(job: Job, wire: Omit<WireOptions, 'tenantHeader'> = {}): Promise<void> {
    try {
      const route = routeFor(this.config, job);
      const message = toWire(job, { ...wire, tenantHeader: this.config.tenantHeader });
      return this.publisher.publish(route.exchange, route.routingKey, message.content, message.options);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }
}
