import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { ManagementClient, managementClientOf, type BrokerPolicy } from '../broker-management/management-client.js';

/**
 * The `max_size` in force on physical queues, as the broker enforces it, for the capacity
 * metrics. Read from the broker at every scrape, never from the configuration: `apply` changes a
 * queue's policy while its stages run, per-tenant settings give each tenant's queue its own
 * bound, and a policy never applied bounds nothing.
 *
 * Stagecoach puts every bound in a policy (topology/queue-policies.ts), so the bound of a queue
 * is the `max-length` of the policy the broker applies to it: of the policies whose pattern
 * matches its name (and that apply to queues), the one of highest priority. They are read with
 * one call (`GET /api/policies/<vhost>`), which answers at once; a queue's own view of its policy
 * (`GET /api/queues/...`) comes with its statistics, up to one collection interval late.
 * Operator policies and `x-max-length` arguments (stagecoach declares neither) are not read.
 */
export class QueueSizeBounds {
  private readonly api: ManagementClient;
  private readonly vhost: string;
  private failing = false;

  constructor(
    config: CompiledConfig,
    private readonly log?: Logger,
    api?: ManagementClient,
  ) {
    // A scrape must not wait long: a short timeout, and the scrape reports no bounds.
    this.api = api ?? managementClientOf(config, 3000);
    this.vhost = vhostOfAmqpUrl(config.broker.url);
  }

  /**
   * The bound of each queue: a number of jobs, or undefined when it is unlimited.
   * @returns undefined when the management API did not answer (logged once until it answers
   *   again): bounds are then unknown, not unlimited.
   */
  async maxSizes(queues: readonly string[]): Promise<Map<string, number | undefined> | undefined> {
    let policies: BrokerPolicy[];
    try {
      policies = await this.api.listPolicies(this.vhost);
    } catch (err) {
      if (!this.failing) {
        this.failing = true;
        this.log?.warn('queue bounds not available: no max_size or utilization metrics until the management API answers', {
          err: (err as Error).message,
        });
      }
      return undefined;
    }
    if (this.failing) {
      this.failing = false;
      this.log?.info('queue bounds available again');
    }
    return new Map(queues.map((queue) => [queue, maxSizeOf(policyOf(policies, queue))]));
  }
}

/** The policy the broker applies to a queue: the matching one of highest priority. */
export function policyOf(policies: readonly BrokerPolicy[], queue: string): BrokerPolicy | undefined {
  let chosen: BrokerPolicy | undefined;
  for (const policy of policies) {
    if (policy['apply-to'] === 'exchanges' || !matches(policy.pattern, queue)) continue;
    if (chosen === undefined || policy.priority > chosen.priority) chosen = policy;
  }
  return chosen;
}

/** A policy's `max-length`, or undefined when it sets none (or there is no policy). */
export function maxSizeOf(policy: BrokerPolicy | undefined): number | undefined {
  const value = policy?.definition['max-length'];
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** Patterns compiled once: every reading tests each queue against every policy. null: not a JavaScript pattern. */
const compiled = new Map<string, RegExp | null>();

function matches(pattern: string, name: string): boolean {
  let regexp = compiled.get(pattern);
  if (regexp === undefined) {
    try {
      regexp = new RegExp(pattern);
    } catch {
      // A pattern only Erlang's regular expressions take: not one of stagecoach's.
      regexp = null;
    }
    // Bounded: a broker with ever new patterns (tenants' own, come and gone) cannot grow it for good.
    if (compiled.size >= 10_000) compiled.clear();
    compiled.set(pattern, regexp);
  }
  return regexp !== null && regexp.test(name);
}
