import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { UnroutableJobError, type UnroutableReason } from '../errors/errors.js';
import { FlagChannel } from '../flags/flag-channel.js';
import type { Job } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';

/**
 * Tells a producer that no queue took its job. The broker cannot: every entry exchange has
 * `<prefix>.unroutable` as its alternate exchange, so such a job is confirmed like any other and
 * never returned to a `mandatory` publisher. So the route the job takes is checked with passive
 * declares: the tenant's exchange (a tenant never provisioned has none), the
 * physical queue (a queue no stage declared does not exist) and the queue's drain flag (a draining
 * queue's entry is cut). A shared queue is one physical queue whatever tenant its jobs carry, as
 * the router sends them (job-router.ts): no tenant exchange is on its way. The check runs while the job is on its way (its answer is awaited with
 * the confirm), and jobs to one route published while a check of it runs share that check, so a
 * stream of jobs costs one check at a time per route, not one per job. Nothing is remembered: a
 * queue drained a moment ago is reported for the next job. A check that fails for another reason
 * (the connection going, access refused) tells nothing, and the job is taken as routed.
 */
export class RouteWatch {
  private readonly names: BrokerNames;
  private readonly checking = new Map<string, Promise<UnroutableReason | undefined>>();
  private flags: FlagChannel | undefined;

  constructor(
    private readonly connection: AmqpConnection,
    private readonly config: CompiledConfig,
    private readonly log: Logger,
  ) {
    this.names = new BrokerNames(config.prefix);
  }

  /** @throws UnroutableJobError when the job's route is closed: it is in the unroutable queue. */
  async check(job: Job): Promise<void> {
    const tenant = queueFor(this.config, job.queue).scope === 'shared' ? undefined : job.tenant;
    const key = tenant === undefined ? job.queue : `${job.queue}/${tenant}`;
    let checking = this.checking.get(key);
    if (checking === undefined) {
      checking = this.closedBecause(job.queue, tenant).finally(() => this.checking.delete(key));
      this.checking.set(key, checking);
    }
    const reason = await checking;
    if (reason !== undefined) throw new UnroutableJobError(job.id, job.queue, tenant, reason);
  }

  async close(): Promise<void> {
    await this.flags?.close();
  }

  private async closedBecause(queue: string, tenant: string | undefined): Promise<UnroutableReason | undefined> {
    const flags = (this.flags ??= new FlagChannel(this.connection));
    try {
      if (tenant !== undefined && !(await flags.exchangeExists(this.names.tenantExchange(tenant)))) return 'tenant-not-provisioned';
      if (!(await flags.queueExists(this.names.queue(queue, tenant)))) return 'queue-not-declared';
      if (await flags.exchangeExists(this.names.stateMarker('draining', queue, tenant))) return 'queue-draining';
      return undefined;
    } catch (err) {
      this.log.debug('route of a published job not checked', { queue, tenant, err: (err as Error).message });
      return undefined;
    }
  }
}
