import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { ConfirmPublisher, type QueueFullObserver } from '../../broker/confirm-publisher.js';
import type { CompiledConfig, CompiledStageConfig } from '../../config/config.types.js';
import { PREFETCH_BUFFER } from '../../config/defaults.js';
import { tenantShare } from '../../config/tenant-share.js';
import type { Logger } from '../../logging/logger.js';
import { vhostOfAmqpUrl } from '../../security/broker-users.js';
import { managementClientOf } from '../../broker-management/management-client.js';
import type { PooledThreadedHandler } from '../../stage/threads/threaded-handler.js';
import { stateFlag, type QueueState } from '../../queue-state/queue-state.js';
import { flagName } from '../../flags/flag.js';
import type { FlagReader } from '../../flags/flag-reader.js';
import { FlagChannel } from '../../flags/flag-channel.js';
import { ListedFlags } from '../../flags/listed-flags.js';
import { ChannelSupervisor } from '../channels/channel-supervisor.js';
import { FairShare } from '../intake/fair-share.js';
import type { LossLedger } from '../loss-ledger.js';
import { QueueProbe, SharedChannel } from '../channels/shared-channel.js';
import type { PooledResources } from '../stage-runner.js';

/**
 * Tenants whose consumers share one work channel. A channel is one broker process and one
 * ordered stream of frames: a hundred tenants on one keeps the channel count far below the
 * 2,047 a connection may have, and a channel lost (healed a second later) interrupts only them.
 */
export const TENANTS_PER_WORK_CHANNEL = 100;

export interface TenantPoolOptions {
  config: CompiledConfig;
  settings: CompiledStageConfig;
  log: Logger;
  ledger: LossLedger;
  /** A shared channel that cannot be healed fails the process, as a runner's own would. */
  onFatal(err: Error): void;
  onQueueFull?: QueueFullObserver;
  /** Worker threads serving every tenant, when the stage has `threads`. */
  threads?: PooledThreadedHandler;
  /** See PooledResources.redeclare. @defaultValue true */
  redeclare?: boolean;
}

/**
 * What the runners of a pooled process (`run --tenants` / `--all-tenants`) share: one confirm
 * channel, a work channel per TENANTS_PER_WORK_CHANNEL tenants, one suspect channel, a queue
 * probe, and the stage's `concurrency` slots as a {@link FairShare}.
 *
 * Lifecycle: `attach(connection)` opens every channel on a new connection (PooledRoster does it
 * before attaching the runners, at start and after every reconnect); `detach()` forgets them
 * when the connection is gone; `close()` ends them after every runner stopped.
 */
export class TenantPool {
  readonly share: FairShare;
  readonly publishers: ChannelSupervisor<ConfirmPublisher>;
  readonly suspects: SharedChannel;
  readonly probe = new QueueProbe();
  private readonly work: SharedChannel[] = [];
  /** Runners given each work channel and not yet released (they join it only when they attach). */
  private readonly assigned = new Map<SharedChannel, number>();
  private connection: AmqpConnection | undefined;

  /** The stage's settings: its `concurrency` is the share's slots. */
  get settings(): CompiledStageConfig {
    return this.options.settings;
  }

  constructor(private readonly options: TenantPoolOptions) {
    const { settings, log, onFatal } = options;
    // Jobs in flight, shared by weight too: as many as one tenant's prefetch, the most it may hold.
    this.share = new FairShare(settings.concurrency, Math.max(settings.tenantPrefetch, settings.concurrency));
    this.publishers = new ChannelSupervisor<ConfirmPublisher>({
      name: 'publisher',
      log,
      onFatal,
      isOpen: (publisher) => publisher.isOpen,
      open: (connection, lost) => ConfirmPublisher.open(connection, () => lost('publisher channel closed'), options.onQueueFull),
      close: (publisher) => publisher.close(),
    });
    this.suspects = new SharedChannel({
      name: 'suspect',
      log,
      onFatal,
      lost: (ids, timedOut) => options.ledger.record(ids, undefined, timedOut),
    });
  }

  /** Channels open now: publisher, suspects, work. */
  get channels(): number {
    return 2 + this.work.length;
  }

  /**
   * What one tenant's runner gets: the least-filled work channel (a new one when all are full),
   * its weight, cap and minimum, and its prefetch: `tenant_prefetch`, at most its cap plus the
   * usual buffer (more in hand than it may run only delays other processes), at least its minimum
   * (a guarantee needs the deliveries in hand to use it).
   */
  resourcesFor(tenant: string): PooledResources {
    const share = tenantShare(this.options.config, tenant);
    const prefetch = Math.max(
      1,
      share.minConcurrency,
      Math.min(this.options.settings.tenantPrefetch, (share.maxConcurrency ?? Number.POSITIVE_INFINITY) + PREFETCH_BUFFER),
    );
    return {
      publishers: this.publishers,
      work: this.workChannel(),
      suspects: this.suspects,
      probe: this.probe,
      share: this.share,
      weight: share.weight,
      maxConcurrency: share.maxConcurrency,
      minConcurrency: share.minConcurrency,
      prefetch,
      redeclare: this.options.redeclare ?? true,
      // Each runner gets a view that refuses another tenant's job and cannot close the threads.
      ...(this.options.threads === undefined ? {} : { handler: this.options.threads.forTenant(tenant) }),
    };
  }

  /** A tenant's runner stopped for good: its place on its work channel is free, and its stage instances in the threads go. */
  async release(tenant: string, resources: PooledResources): Promise<void> {
    const count = this.assigned.get(resources.work);
    if (count !== undefined) this.assigned.set(resources.work, count - 1);
    await this.options.threads?.release(tenant);
  }

  async attach(connection: AmqpConnection): Promise<void> {
    this.connection = connection;
    this.probe.attach(connection);
    await this.publishers.attach(connection);
    await this.suspects.attach(connection);
    for (const channel of this.work) await channel.attach(connection);
  }

  detach(): void {
    this.connection = undefined;
    this.publishers.detach();
    this.suspects.detach();
    for (const channel of this.work) channel.detach();
  }

  async close(): Promise<void> {
    this.connection = undefined;
    for (const channel of this.work) await channel.close();
    await this.suspects.close();
    await this.probe.close();
    await this.publishers.close();
  }

  /**
   * Every queue state of the stage's input at once, from one listing of the marker exchanges
   * (src/queue-state/queue-state.ts): a thousand tenants are a thousand passive declares otherwise.
   * @returns undefined when the management API does not answer (each runner then looks itself).
   */
  async statesOf(targets: ReadonlyArray<{ queue: string; tenant?: string; variant?: string }>): Promise<Array<QueueState | undefined>> {
    const { config, log } = this.options;
    let names: Set<string>;
    try {
      names = new Set(await managementClientOf(config).listExchangeNames(vhostOfAmqpUrl(config.broker.url)));
    } catch (err) {
      log.warn('queue states not listed (management API); each tenant reads its own', { err: (err as Error).message });
      return targets.map(() => undefined);
    }
    return targets.map((target) => {
      if (names.has(flagName(config.prefix, stateFlag('draining', target)))) return 'draining';
      return names.has(flagName(config.prefix, stateFlag('paused', target))) ? 'paused' : 'active';
    });
  }

  /**
   * Where a declaration of every tenant's topology reads the drain markers: one listing through
   * the management API per look instead of two passive declares per tenant (each missing marker
   * costing a channel), or those passive declares on `connection` when the API does not answer.
   * Not listed beforehand to learn whether it answers: that was a listing of every exchange more
   * at each start, for nothing (a declaration that binds no entry asks nothing).
   */
  drainMarkers(connection: AmqpConnection): { drainMarkers: FlagReader } {
    const { config, log } = this.options;
    const listed = new ListedFlags(managementClientOf(config), vhostOfAmqpUrl(config.broker.url));
    const probed = new FlagChannel(connection);
    return {
      drainMarkers: {
        present: (names) =>
          listed.present(names).catch((err: unknown) => {
            log.debug('drain markers probed one by one (management API)', { err: (err as Error).message });
            return probed.present(names);
          }),
        close: () => probed.close(),
      },
    };
  }

  private workChannel(): SharedChannel {
    const count = (channel: SharedChannel): number => this.assigned.get(channel) ?? 0;
    let least = this.work[0];
    for (const channel of this.work) if (count(channel) < count(least)) least = channel;
    if (least !== undefined && count(least) < TENANTS_PER_WORK_CHANNEL) {
      this.assigned.set(least, count(least) + 1);
      return least;
    }
    const { log, onFatal, ledger } = this.options;
    const channel = new SharedChannel({
      name: `work-${this.work.length + 1}`,
      log,
      onFatal,
      lost: (ids, timedOut) => ledger.record(ids, undefined, timedOut),
    });
    this.work.push(channel);
    this.assigned.set(channel, 1);
    // A tenant added while connected: its channel opens now, and the runner joins it when it attaches.
    if (this.connection !== undefined) void channel.attach(this.connection).catch(() => undefined);
    return channel;
  }
}
