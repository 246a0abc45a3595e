import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { ControlMessage } from '../control/control-protocol.js';
import type { RateLimitedError } from '../errors/errors.js';
import type { Job } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import type { FlowEventSink } from './flow-watch.js';
import { bucketsOf, type Bucket } from './bucket.js';
import { BucketKeeper } from './bucket-keeper.js';
import { LimitResolver, queueBuckets, type LimitScope, type LimitSettings } from './limit-resolver.js';
import { Permit } from './permit.js';
import { TokenSource, type BucketSample, type GrantObserver } from './token-source.js';

/** See FlowControl.admission. */
export type Admit = (
  delivery: { message: { properties: { headers?: Record<string, unknown> | undefined } } },
  granted: () => void,
  limited: (action: 'reschedule' | 'drop', waitMs: number) => void,
) => Permit | undefined;

/** What FlowControl tells the rest of its process (ProcessServices wires them). */
export interface FlowHooks {
  /** Told of every token granted: metrics and `rate_limit.*` events (FlowWatch). */
  observe?: GrantObserver;
  /** Sends a `limits` control message to every process (a hold of partitions). */
  broadcast?: (message: ControlMessage) => Promise<void>;
  /** Publishes a `rate_limit.*` event. */
  event?: FlowEventSink;
}

/** How often a process checks the sizes of the buckets it used lately, ms (a lowering whose keeper died is taken over). */
const RECHECK_MS = 10_000;
/** Most buckets checked per round: a process with thousands of per-tenant partitions spreads them. */
const RECHECK_BATCH = 20;

/**
 * Flow control for one process (docs/flow-control.md): the limits of every runner of it, kept on
 * the broker as tokens. Runners get a {@link LimitResolver} for their scope and ask for a
 * {@link Permit} per delivery; the process's {@link TokenSource} serves them, and its
 * {@link BucketKeeper} declares each bucket and keeps it at its size the first time it is used,
 * when the limits change (`update`), after a reconnection and now and then.
 *
 * Lifecycle: `attach()` on every connection, `detach()` when it is gone, `close()` once after
 * every runner stopped.
 */
export class FlowControl implements LimitSettings {
  config: CompiledConfig;
  version = 0;
  private readonly source: TokenSource;
  private keeper: BucketKeeper | undefined;
  private attached!: Promise<void>;
  private onAttached!: () => void;
  /** Buckets this process used, with when it last asked for them. */
  private readonly known = new Map<string, { bucket: Bucket; used: number }>();
  /** Per connection: the bucket (at a size) declared and sized once. */
  private sized = new Map<string, Promise<void>>();
  /** Physical queue -> the scope its queue limits come from (to resize them when limits change). */
  private readonly scopes = new Map<string, LimitScope>();
  private readonly timer: NodeJS.Timeout;
  private cursor = 0;

  constructor(
    config: CompiledConfig,
    private readonly log: Logger,
    private readonly hooks: FlowHooks = {},
  ) {
    this.config = config;
    this.source = new TokenSource(config.prefix, log, (bucket) => this.ready(bucket), hooks.observe);
    this.resetAttached();
    this.timer = setInterval(() => void this.recheck(), RECHECK_MS);
    this.timer.unref();
  }

  /** What decides the limits of one runner's jobs. */
  resolver(scope: LimitScope): LimitResolver {
    this.scopes.set(scope.physical, scope);
    return new LimitResolver(this, scope, this.config.tenantHeader);
  }

  /**
   * The dispatcher's `admit` for a runner's scope: a permit for each delivery some limit applies
   * to. `limited` is called for a job whose own policy says `reschedule` or `drop` once its limit
   * is found reached (see Permit).
   */
  admission(scope: LimitScope): Admit {
    const resolver = this.resolver(scope);
    return (delivery, granted, limited) => {
      const headers = delivery.message.properties.headers;
      const buckets = resolver.buckets(headers);
      if (buckets.length === 0) return undefined;
      const action = resolver.onLimit(headers);
      return this.permit(buckets, granted, action === 'wait' ? undefined : (waitMs) => limited(action, waitMs));
    };
  }

  /** Waits for a token of every bucket (see Permit); `onGranted` once all are held. */
  permit(buckets: readonly Bucket[], onGranted: (permit: Permit) => void, onLimit?: (waitMs: number) => void): Permit {
    const now = performance.now();
    for (const bucket of buckets) {
      const entry = this.known.get(bucket.id);
      if (entry === undefined) this.known.set(bucket.id, { bucket, used: now });
      else entry.used = now;
    }
    return new Permit(this.source, buckets, onGranted, onLimit);
  }

  /** Every bucket this process has used: its jobs waiting and the tokens it holds. */
  samples(): BucketSample[] {
    return this.source.samples();
  }

  /** False while the token channel is down on a live connection (being re-opened): no limited job can start. */
  get tokensOpen(): boolean {
    return this.source.open;
  }

  async attach(connection: AmqpConnection): Promise<void> {
    this.sized = new Map();
    this.keeper = new BucketKeeper(connection, { prefix: this.config.prefix, durable: this.config.durable, log: this.log });
    await this.source.attach(connection);
    this.onAttached();
  }

  detach(): void {
    const keeper = this.keeper;
    this.keeper = undefined;
    void keeper?.close();
    this.source.detach();
    this.resetAttached();
  }

  /**
   * The limits changed (a `limits` control message: the configuration file was changed by the
   * admin API or `apply`): what runners work out from now on uses `config`, and every bucket this
   * process knows is brought to its new size at once.
   */
  update(config: CompiledConfig): void {
    this.config = config;
    this.version++;
    for (const entry of this.known.values()) {
      const now = this.current(entry.bucket);
      if (now === undefined || now.size === entry.bucket.size) continue;
      entry.bucket = now;
      this.sized.delete(`${now.id}#${now.size}`);
      void this.ready(now);
    }
  }

  /**
   * A handler met a limit downstream (RateLimitedError, OJS rate-limiting extension 9.1): no job
   * of its partitions starts before `until`, here at once and in every other process as soon as
   * the `limits` control message reaches it. The partitions: the error's `key` (a tenant's own
   * partition of a per-tenant limit), else every partition the job held but its queue's.
   */
  rateLimited(permit: Permit | undefined, job: Job, error: RateLimitedError): void {
    const partitions =
      error.key === undefined
        ? (permit?.partitions ?? []).filter((partition) => !partition.startsWith('queue:'))
        : [this.config.limits.get(error.key)?.perTenant === true ? `${error.key}@${job.tenant ?? '-'}` : error.key];
    if (partitions.length === 0) return;
    const until = error.until.getTime();
    this.hold(partitions, until);
    const message: ControlMessage = { command: 'limits', hold: partitions, until: error.until.toISOString() };
    void this.hooks
      .broadcast?.(message)
      .catch((err: Error) => this.log.warn('limit hold not sent to other processes', { err: err.message }));
    for (const key of partitions) {
      this.hooks.event?.('rate_limit.dynamic_adjusted', key, {
        key,
        until: error.until.toISOString(),
        reason: error.message,
        job_id: job.id,
      });
    }
  }

  /** A job dropped for its own policy (`on_limit: drop`): the extension's `rate_limit.dropped`. */
  dropped(job: Job): void {
    const key = job.rate_limit?.key ?? '';
    this.log.info('job dropped: its rate limit was reached (on_limit: drop)', { key, job_id: job.id, type: job.type });
    this.hooks.event?.('rate_limit.dropped', key, { key, job_id: job.id, job_type: job.type });
  }

  /** Holds partitions until `until` (epoch ms): see TokenSource.hold. */
  hold(partitions: readonly string[], until: number): void {
    if (!(until > Date.now())) return;
    this.log.info('flow limits held: a handler was rate limited downstream', { partitions, until: new Date(until).toISOString() });
    this.source.hold(partitions, until);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.keeper?.close();
    this.keeper = undefined;
    await this.source.close();
  }

  /** Declared and sized once per connection and size, before its tokens are consumed. */
  private ready(bucket: Bucket): Promise<void> {
    const key = `${bucket.id}#${bucket.size}`;
    let ready = this.sized.get(key);
    if (ready === undefined) {
      ready = this.attached.then(async () => {
        const keeper = this.keeper;
        if (keeper === undefined) return;
        await keeper.declare(bucket);
        await keeper.resize(bucket);
      });
      ready.catch((err: Error) => {
        this.sized.delete(key);
        this.log.warn('flow bucket not ready', { bucket: bucket.id, err: err.message });
      });
      this.sized.set(key, ready);
    }
    return ready;
  }

  /** The bucket as the current limits size it (same id); undefined when they no longer name it. */
  private current(bucket: Bucket): Bucket | undefined {
    const { config } = this;
    const { partition } = bucket;
    let candidates: Bucket[];
    if (partition.startsWith('queue:')) {
      const scope = this.scopes.get(partition.slice('queue:'.length));
      if (scope === undefined) return undefined;
      candidates = queueBuckets(config, scope);
    } else {
      const limit = config.limits.get(partition.split('@')[0]);
      if (limit === undefined) return undefined;
      candidates = bucketsOf(partition, limit);
    }
    return candidates.find((candidate) => candidate.id === bucket.id);
  }

  /** A few recently used buckets are sized again: a lowering whose process died is taken over. */
  private async recheck(): Promise<void> {
    const keeper = this.keeper;
    if (keeper === undefined) return;
    const recent = [...this.known.values()].filter((entry) => performance.now() - entry.used < 6 * RECHECK_MS);
    if (recent.length === 0) return;
    for (let i = 0; i < Math.min(RECHECK_BATCH, recent.length); i++) {
      const entry = recent[(this.cursor + i) % recent.length];
      await keeper.resize(entry.bucket).catch(() => undefined);
    }
    this.cursor = (this.cursor + RECHECK_BATCH) % recent.length;
  }

  private resetAttached(): void {
    this.attached = new Promise<void>((resolve) => (this.onAttached = resolve));
  }
}
