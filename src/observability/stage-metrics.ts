import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from '../logging/logger.js';
import type { Deferred } from './deferred-counts.js';
import { BoundInstance, DURATION_BUCKETS, STAGE_LABELS, type Families, type StageLabelName } from './instance-metrics.js';
import { OTHER_TENANTS, TenantLabels } from './tenant-labels.js';
import { QueueGauges } from './queue-gauges.js';
import { RunnerGauges } from './runner-gauges.js';
import type { InstanceMetrics, QueueDepthSource, RunnerSample, StageMetricLabels, StageMetricsOptions } from './metric-types.js';

// The API of this module as its callers know it: the types live beside it, in files of their own.
export type {
  InstanceMetrics,
  QueueDepthSample,
  QueueDepthSource,
  RunnerSample,
  StageMetricLabels,
  StageMetricsOptions,
} from './metric-types.js';
export { DURATION_BUCKETS } from './instance-metrics.js';

/**
 * Prometheus metrics of a stage process, over prom-client, in a registry of their own (never
 * prom-client's global one, so that two instances in one process, or a library user's own
 * metrics, never collide). Every metric below is prefixed `stagecoach_`; the registry also
 * holds prom-client's default Node.js metrics (`process_*`, `nodejs_*`, unprefixed, as
 * dashboards expect them).
 *
 * Labels shared by the job metrics:
 * - `stage`: the stage name (`converter`);
 * - `queue`: the logical input queue (`conversions`), not the physical queue name;
 * - `tenant`: the tenant slug, or `""` for a shared-queue consumer; `_other` for the tenants
 *   beyond the first `maxTenantSeries` (TenantLabels: a pooled process's scrape stays bounded).
 *
 * | metric | type | extra labels | meaning |
 * | --- | --- | --- | --- |
 * | `stagecoach_jobs_consumed_total` | counter | | deliveries taken from the input queue and handed to the stage (redeliveries count again) |
 * | `stagecoach_jobs_completed_total` | counter | | handler calls that returned normally |
 * | `stagecoach_jobs_failed_total` | counter | `error_type` | handler calls that threw, by OJS error type (one per failed attempt, whatever happens next) |
 * | `stagecoach_jobs_retried_total` | counter | | failed jobs scheduled for another attempt |
 * | `stagecoach_jobs_dead_lettered_total` | counter | | jobs sent to dead letters |
 * | `stagecoach_jobs_discarded_total` | counter | | jobs dropped on purpose (OJS discard): acknowledged, not retried, not dead-lettered |
 * | `stagecoach_jobs_published_total` | counter | `output` | jobs the stage emitted and the broker confirmed, by logical output queue |
 * | `stagecoach_acks_total` | counter | | input deliveries acknowledged to the broker |
 * | `stagecoach_handler_duration_seconds` | histogram | `outcome` (`completed`/`failed`) | handler run time, buckets 1 ms .. 5 min |
 * | `stagecoach_queue_depth` | gauge | `physical_queue` | ready messages in a queue, from {@link StageMetrics.setQueueDepthSource} at scrape time (a group's serves its last background reading: QueueDepthCache) |
 * | `stagecoach_queue_max_size` | gauge | `physical_queue` | the queue's `max_size` (messages) in force on the broker, from the same source; no series when unlimited or unknown |
 * | `stagecoach_queue_utilization` | gauge | `physical_queue` | depth / max_size (ratio, 1 = full), from the same scrape; no series when unlimited or unknown |
 * | `stagecoach_queue_overflow_total` | counter | `physical_queue`, `policy`; no `stage` | publishes of this process that a full queue refused (`policy` `reject`, or `block`: each refused try); see {@link StageMetrics.queueOverflow} |
 * | `stagecoach_consuming` | gauge | | 1 while the instance (one tenant of a pooled process) consumes as it should, or is meant not to (paused, quiet); 0 while it should and does not. From {@link StageMetrics.setRunnerSource} at scrape time |
 * | `stagecoach_jobs_in_flight` | gauge | | jobs of the instance being processed or settled now, from the same source |
 * | `stagecoach_connection_up` | gauge | none at all | 1 while the broker connection is up, else 0 |
 * | `stagecoach_connection_blocked` | gauge | none at all | 1 while the broker blocks the connection (a resource alarm), else 0 |
 * | `stagecoach_reconnects_total` | counter | none at all | times the broker connection was re-established after a loss |
 *
 * Hot path: a runner calls {@link StageMetrics.instance} once per stage instance and keeps the
 * returned {@link InstanceMetrics}; its methods go to label children bound when the instance
 * was made, so no label object is built per call: `failed` and `published` add one `Map`
 * lookup (a child is made on the first use of an `error_type` or `output`). What remains is
 * prom-client's own hashing of the bound labels: about 0.3 µs per counter increment and 1 µs
 * with a histogram observation. `error_type` values beyond `maxErrorTypes` distinct ones are
 * counted as `other`.
 */
export class StageMetrics {
  /** The registry holding every metric of this object (and the default Node.js metrics). */
  readonly registry: Registry;

  private readonly log: Logger | undefined;
  private readonly instances = new Map<string, BoundInstance>();
  /** Every deferred count of every instance: flushed into prom-client when it collects. */
  private readonly deferred: Deferred[] = [];
  private readonly errorTypes = new Set<string>();
  private readonly maxErrorTypes: number;
  private readonly tenants: TenantLabels;
  private readonly families: Families;
  private readonly queueGauges: QueueGauges;
  private readonly runnerGauges: RunnerGauges;
  private readonly queueOverflows: Counter<'queue' | 'tenant' | 'physical_queue' | 'policy'>;
  private readonly connectionUp: Gauge;
  private readonly connectionBlocked: Gauge;
  private readonly reconnects: Counter;

  constructor(options: StageMetricsOptions = {}) {
    this.registry = options.registry ?? new Registry();
    this.log = options.log;
    this.maxErrorTypes = options.maxErrorTypes ?? 50;
    this.tenants = new TenantLabels(options.maxTenantSeries);
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });

    const registers = [this.registry];
    // prom-client calls collect() on each metric when scraped: the deferred counts land first.
    const collect = (): void => this.flush();
    const counter = <L extends string>(name: string, help: string, extra: readonly L[] = []): Counter<StageLabelName | L> =>
      new Counter({ name, help, labelNames: [...STAGE_LABELS, ...extra], registers, collect });

    this.families = {
      consumed: counter('stagecoach_jobs_consumed_total', 'Deliveries taken from the input queue and handed to the stage.'),
      completed: counter('stagecoach_jobs_completed_total', 'Handler calls that returned normally.'),
      failed: counter('stagecoach_jobs_failed_total', 'Handler calls that threw, by error type (every failed attempt).', ['error_type']),
      retried: counter('stagecoach_jobs_retried_total', 'Failed jobs scheduled for another attempt.'),
      deadLettered: counter('stagecoach_jobs_dead_lettered_total', 'Jobs sent to dead letters.'),
      discarded: counter('stagecoach_jobs_discarded_total', 'Jobs dropped on purpose (acknowledged, neither retried nor dead-lettered).'),
      published: counter(
        'stagecoach_jobs_published_total',
        'Jobs emitted by the stage and confirmed by the broker, by logical output queue.',
        ['output'],
      ),
      acks: counter('stagecoach_acks_total', 'Input deliveries acknowledged to the broker.'),
      duration: new Histogram({
        name: 'stagecoach_handler_duration_seconds',
        help: 'Handler run time in seconds, by outcome (completed or failed).',
        labelNames: [...STAGE_LABELS, 'outcome'],
        buckets: [...DURATION_BUCKETS],
        registers,
        collect,
      }),
    };
    this.queueGauges = new QueueGauges({
      registry: this.registry,
      tenants: this.tenants,
      timeoutMs: options.queueDepthTimeoutMs ?? 5000,
      log: this.log,
    });
    this.queueOverflows = new Counter({
      name: 'stagecoach_queue_overflow_total',
      help: 'Publishes of this process that a full queue refused (a producer waiting for room in a block queue counts each try), by queue and overflow policy.',
      labelNames: ['queue', 'tenant', 'physical_queue', 'policy'],
      registers,
    });
    this.runnerGauges = new RunnerGauges(this.registry, this.tenants);
    this.connectionUp = new Gauge({ name: 'stagecoach_connection_up', help: '1 while the broker connection is up, else 0.', registers });
    this.connectionUp.set(0);
    this.connectionBlocked = new Gauge({
      name: 'stagecoach_connection_blocked',
      help: '1 while the broker blocks the connection (a memory or disk alarm): nothing is published or confirmed, else 0.',
      registers,
    });
    this.connectionBlocked.set(0);
    this.reconnects = new Counter({
      name: 'stagecoach_reconnects_total',
      help: 'Times the broker connection was re-established after a loss.',
      registers,
    });
  }

  /** Hands every count kept since the last scrape to prom-client. */
  flush(): void {
    for (const deferred of this.deferred) deferred.flush();
  }

  /** The content type of {@link text}: the Prometheus text exposition format. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Every metric in the Prometheus text format (what `GET /metrics` serves). */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /**
   * The metrics of one stage instance, memoised per `(stage, queue, tenant)`: call it once when
   * the instance starts and keep the result. Its series start at 0 so that `rate()` sees the
   * first job. `outputs`, if given, starts the `published` series of those outputs at 0 too.
   */
  instance(labels: StageMetricLabels): InstanceMetrics {
    const tenant = this.tenants.of(labels.tenant ?? '');
    const key = `${labels.stage}\0${labels.queue}\0${tenant}`;
    let bound = this.instances.get(key);
    if (bound === undefined) {
      bound = new BoundInstance(
        this.families,
        (type) => this.errorTypeLabel(type),
        { stage: labels.stage, queue: labels.queue, tenant },
        (d) => this.deferred.push(d),
      );
      this.instances.set(key, bound);
    }
    for (const output of labels.outputs ?? []) bound.publishedChild(output);
    return bound;
  }

  /** Whether `tenant`'s series carry its own label (not `_other`: see TenantLabels); `""` (shared) always does. */
  labelsOwn(tenant: string): boolean {
    return this.tenants.of(tenant) !== OTHER_TENANTS;
  }

  /**
   * Where `stagecoach_queue_depth` comes from: called at every scrape (never in between). A
   * source that throws, rejects, or takes longer than `queueDepthTimeoutMs` leaves the gauge
   * empty for that scrape and is logged; the scrape itself succeeds. `undefined` removes it.
   * @param owner whose source it replaces: the groups sharing these metrics (`dev`) pass
   * themselves, and every owner's samples are served together. @defaultValue the metrics
   */
  setQueueDepthSource(source: QueueDepthSource | undefined, owner: object = this): void {
    this.queueGauges.setSource(source, owner);
  }

  /**
   * Where `stagecoach_consuming` and `stagecoach_jobs_in_flight` come from, at every scrape
   * (synchronous, cheap). @param owner as for {@link setQueueDepthSource}
   */
  setRunnerSource(source: (() => readonly RunnerSample[]) | undefined, owner: object = this): void {
    this.runnerGauges.setSource(source, owner);
  }

  /**
   * Counts one job a full queue refused (`stagecoach_queue_overflow_total`). Counted where it can
   * be seen: by the process whose publish the broker refused. `drop_oldest` drops happen inside
   * the broker, which tells no client, so `policy` is `reject` or `block` for every count made
   * here; with `block`, every refused try of a producer waiting for room counts.
   */
  queueOverflow(labels: {
    queue?: string | undefined;
    tenant?: string | undefined;
    physicalQueue?: string | undefined;
    policy: string;
  }): void {
    const tenant = this.tenants.of(labels.tenant ?? '');
    this.queueOverflows.inc({
      queue: labels.queue ?? '',
      tenant,
      physical_queue: tenant === OTHER_TENANTS ? OTHER_TENANTS : (labels.physicalQueue ?? ''),
      policy: labels.policy,
    });
  }

  /** Sets `stagecoach_connection_up`. */
  setConnected(up: boolean): void {
    this.connectionUp.set(up ? 1 : 0);
  }

  /** Sets `stagecoach_connection_blocked`. */
  setBlocked(blocked: boolean): void {
    this.connectionBlocked.set(blocked ? 1 : 0);
  }

  /** Counts one re-established broker connection (`stagecoach_reconnects_total`). */
  reconnected(): void {
    this.reconnects.inc();
  }

  /** The `error_type` label value, capped so that odd errors cannot explode the series. */
  private errorTypeLabel(errorType: string | undefined): string {
    const type = errorType === undefined || errorType === '' ? 'unknown' : errorType;
    if (this.errorTypes.has(type)) return type;
    if (this.errorTypes.size >= this.maxErrorTypes) return OTHER_ERROR_TYPE;
    this.errorTypes.add(type);
    return type;
  }
}

const OTHER_ERROR_TYPE = 'other';
