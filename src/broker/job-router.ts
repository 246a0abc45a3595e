import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { StagecoachError, TenantRequiredError } from '../errors/errors.js';
import { toWire, type WireOptions } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
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
  if (queue.scope === 'shared') return { exchange: names.direct, routingKey: job.queue };
  if (job.tenant === undefined) throw new TenantRequiredError(job.queue);
  return { exchange: names.root, routingKey: job.queue };
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
