import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from '../logging/logger.js';

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
 * - `tenant`: the tenant slug, or `""` for a shared-queue consumer.
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
 * | `stagecoach_queue_depth` | gauge | `physical_queue` | ready messages in a queue, read at scrape time from {@link StageMetrics.setQueueDepthSource} |
 * | `stagecoach_queue_max_size` | gauge | `physical_queue` | the queue's `max_size` (messages) in force on the broker, from the same source; no series when unlimited or unknown |
 * | `stagecoach_queue_utilization` | gauge | `physical_queue` | depth / max_size (ratio, 1 = full), from the same scrape; no series when unlimited or unknown |
 * | `stagecoach_queue_overflow_total` | counter | `physical_queue`, `policy`; no `stage` | jobs this process published that a full queue refused (`policy` `reject`); see {@link StageMetrics.queueOverflow} |
 * | `stagecoach_consuming` | gauge | | 1 while the instance (one tenant of a pooled process) consumes as it should, or is meant not to (paused, quiet); 0 while it should and does not. From {@link StageMetrics.setRunnerSource} at scrape time |
 * | `stagecoach_jobs_in_flight` | gauge | | jobs of the instance being processed or settled now, from the same source |
 * | `stagecoach_connection_up` | gauge | none at all | 1 while the broker connection is up, else 0 |
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
  private readonly queueDepthTimeoutMs: number;
  private queueDepthSource: QueueDepthSource | undefined;
  private queueDepthFailing = false;
  /** The samples of the scrape under way: the three queue gauges collect from one source call. */
  private queueSampling: Promise<readonly QueueDepthSample[] | undefined> | undefined;

  private readonly families: Families;
  private readonly queueDepth: Gauge<StageLabelName | 'physical_queue'>;
  private readonly queueMaxSize: Gauge<StageLabelName | 'physical_queue'>;
  private readonly queueUtilization: Gauge<StageLabelName | 'physical_queue'>;
  private readonly queueOverflows: Counter<'queue' | 'tenant' | 'physical_queue' | 'policy'>;
  private readonly connectionUp: Gauge;
  private runnerSource: (() => readonly RunnerSample[]) | undefined;
  private readonly reconnects: Counter;

  constructor(options: StageMetricsOptions = {}) {
    this.registry = options.registry ?? new Registry();
    this.log = options.log;
    this.maxErrorTypes = options.maxErrorTypes ?? 50;
    this.queueDepthTimeoutMs = options.queueDepthTimeoutMs ?? 5000;
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
    this.queueDepth = new Gauge({
      name: 'stagecoach_queue_depth',
      help: 'Messages ready in a queue, read from the broker at scrape time.',
      labelNames: [...STAGE_LABELS, 'physical_queue'],
      registers,
      // Called by prom-client on every scrape of this gauge.
      collect: () => this.collectQueues((gauge, s) => gauge.set(labelsOf(s), s.depth)),
    });
    this.queueMaxSize = new Gauge({
      name: 'stagecoach_queue_max_size',
      help: 'The max_size (messages) in force on a queue, read from the broker at scrape time; absent when unlimited.',
      labelNames: [...STAGE_LABELS, 'physical_queue'],
      registers,
      collect: () =>
        this.collectQueues((gauge, s) => {
          if (s.maxSize !== undefined) gauge.set(labelsOf(s), s.maxSize);
        }, 'max'),
    });
    this.queueUtilization = new Gauge({
      name: 'stagecoach_queue_utilization',
      help: 'Queue depth divided by its max_size (1 = full), at scrape time; absent when unlimited.',
      labelNames: [...STAGE_LABELS, 'physical_queue'],
      registers,
      collect: () =>
        this.collectQueues((gauge, s) => {
          if (s.maxSize !== undefined && s.maxSize > 0) gauge.set(labelsOf(s), s.depth / s.maxSize);
        }, 'utilization'),
    });
    this.queueOverflows = new Counter({
      name: 'stagecoach_queue_overflow_total',
      help: 'Jobs this process published that a full queue refused, by queue and overflow policy.',
      labelNames: ['queue', 'tenant', 'physical_queue', 'policy'],
      registers,
    });
    const runnerGauge = (name: string, help: string, value: (sample: RunnerSample) => number): Gauge<StageLabelName> =>
      new Gauge({
        name,
        help,
        labelNames: [...STAGE_LABELS],
        registers,
        collect() {
          const source = self.runnerSource;
          if (source === undefined) return;
          // Tenants released since the last scrape leave no stale series.
          this.reset();
          for (const sample of source()) this.set({ stage: sample.stage, queue: sample.queue, tenant: sample.tenant }, value(sample));
        },
      });
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- prom-client binds `this` in collect() to the gauge
    const self = this;
    runnerGauge('stagecoach_consuming', 'Whether the instance consumes as it should (1), or should and does not (0).', (s) =>
      s.consuming ? 1 : 0,
    );
    runnerGauge('stagecoach_jobs_in_flight', 'Jobs of the instance being processed or settled now.', (s) => s.inFlight);
    this.connectionUp = new Gauge({ name: 'stagecoach_connection_up', help: '1 while the broker connection is up, else 0.', registers });
    this.connectionUp.set(0);
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
    const tenant = labels.tenant ?? '';
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

  /**
   * Where `stagecoach_queue_depth` comes from: called at every scrape (never in between). A
   * source that throws, rejects, or takes longer than `queueDepthTimeoutMs` leaves the gauge
   * empty for that scrape and is logged; the scrape itself succeeds. `undefined` removes it.
   */
  setQueueDepthSource(source: QueueDepthSource | undefined): void {
    this.queueDepthSource = source;
  }

  /** Where `stagecoach_consuming` and `stagecoach_jobs_in_flight` come from, at every scrape (synchronous, cheap). */
  setRunnerSource(source: (() => readonly RunnerSample[]) | undefined): void {
    this.runnerSource = source;
  }

  /**
   * Counts one job a full queue refused (`stagecoach_queue_overflow_total`). Counted where it can
   * be seen: by the process whose publish the broker refused. `drop_oldest` drops happen inside
   * the broker, which tells no client, so `policy` is `reject` for every count made here.
   */
  queueOverflow(labels: {
    queue?: string | undefined;
    tenant?: string | undefined;
    physicalQueue?: string | undefined;
    policy: string;
  }): void {
    this.queueOverflows.inc({
      queue: labels.queue ?? '',
      tenant: labels.tenant ?? '',
      physical_queue: labels.physicalQueue ?? '',
      policy: labels.policy,
    });
  }

  /** Sets `stagecoach_connection_up`. */
  setConnected(up: boolean): void {
    this.connectionUp.set(up ? 1 : 0);
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

  /**
   * Fills one of the queue gauges from this scrape's samples. prom-client collects the metrics
   * of a scrape concurrently: the first gauge to collect calls the source, the others share its
   * answer, so depth, max size and utilization always come from the same reading.
   */
  private async collectQueues(
    fill: (gauge: Gauge<StageLabelName | 'physical_queue'>, sample: QueueDepthSample) => void,
    which: 'depth' | 'max' | 'utilization' = 'depth',
  ): Promise<void> {
    const gauge = which === 'depth' ? this.queueDepth : which === 'max' ? this.queueMaxSize : this.queueUtilization;
    if (this.queueSampling === undefined) {
      const sampling = this.sampleQueues();
      this.queueSampling = sampling;
      // Cleared once answered: the next scrape reads the broker again.
      void sampling.finally(() => {
        if (this.queueSampling === sampling) this.queueSampling = undefined;
      });
    }
    const samples = await this.queueSampling;
    // Stale values would mislead: a scrape without samples reports none.
    gauge.reset();
    for (const s of samples ?? []) {
      if (Number.isFinite(s.depth)) fill(gauge, s);
    }
  }

  /** The source's samples, or undefined (logged) when it fails or takes too long. */
  private async sampleQueues(): Promise<readonly QueueDepthSample[] | undefined> {
    const source = this.queueDepthSource;
    if (source === undefined) return undefined;
    let samples: readonly QueueDepthSample[];
    try {
      samples = await withTimeout(Promise.resolve().then(source), this.queueDepthTimeoutMs);
    } catch (err) {
      if (!this.queueDepthFailing) {
        this.queueDepthFailing = true;
        this.log?.warn('queue depth not available for this scrape', { error: err instanceof Error ? err.message : String(err) });
      } else {
        this.log?.debug('queue depth still not available', { error: err instanceof Error ? err.message : String(err) });
      }
      return undefined;
    }
    if (this.queueDepthFailing) {
      this.queueDepthFailing = false;
      this.log?.info('queue depth available again');
    }
    return samples;
  }
}

export interface StageMetricsOptions {
  /** The registry to register into; a new one if absent. */
  registry?: Registry;
  /** Also collect prom-client's default Node.js metrics into the registry (default true). */
  defaultMetrics?: boolean;
  /** Where a failing queue-depth source is reported. */
  log?: Logger;
  /** How long a scrape waits for the queue-depth source (default 5000 ms). */
  queueDepthTimeoutMs?: number;
  /** Distinct `error_type` values kept before the rest are counted as `other` (default 50). */
  maxErrorTypes?: number;
}

export interface StageMetricLabels {
  stage: string;
  /** The logical input queue. */
  queue: string;
  /** The tenant; absent, null or `""` for a shared queue. */
  tenant?: string | null;
  /** Outputs whose `published` series should exist (at 0) from the start. */
  outputs?: readonly string[];
}

/** The metrics of one stage instance; every method is cheap enough for the hot path. */
export interface InstanceMetrics {
  /** A delivery was taken from the input queue and handed to the stage. */
  consumed(): void;
  /** The handler returned normally after `seconds`. */
  completed(seconds: number): void;
  /** The handler threw after `seconds`; `errorType` is the OJS error type (e.g. `HANDLER_ERROR`, `TypeError`). */
  failed(seconds: number, errorType: string): void;
  /** A failed job was scheduled for another attempt. */
  retried(): void;
  /** A job was dead-lettered. */
  deadLettered(): void;
  /** A job was discarded on purpose. */
  discarded(): void;
  /** A job emitted to the logical queue `output` was confirmed by the broker. */
  published(output: string): void;
  /** An input delivery was acknowledged. */
  acked(): void;
}

/** One queue's depth, as a {@link QueueDepthSource} reports it. */
/** One stage instance (one tenant of a pooled process) as a scrape sees it. */
export interface RunnerSample {
  stage: string;
  queue: string;
  /** '' for a shared queue. */
  tenant: string;
  consuming: boolean;
  inFlight: number;
}

export interface QueueDepthSample {
  stage: string;
  /** The logical queue. */
  queue: string;
  /** The tenant, absent or `""` for a shared queue. */
  tenant?: string | null;
  /** The queue's name on the broker (`ojs.queue.conversions.acme.pdf`). */
  physicalQueue: string;
  /** Messages ready for delivery: what RabbitMQ counts against `max-length` (unacknowledged ones do not count). */
  depth: number;
  /**
   * The `max_size` (messages) in force on the broker (its policy, or a `x-max-length` argument);
   * absent when the queue is unlimited or the source could not tell.
   */
  maxSize?: number;
}

export type QueueDepthSource = () => Promise<readonly QueueDepthSample[]> | readonly QueueDepthSample[];

type StageLabelName = 'stage' | 'queue' | 'tenant';

function labelsOf(s: QueueDepthSample): Record<StageLabelName | 'physical_queue', string> {
  return { stage: s.stage, queue: s.queue, tenant: s.tenant ?? '', physical_queue: s.physicalQueue };
}
type StageLabelValues = Record<StageLabelName, string>;
interface Inc {
  inc(value?: number): void;
}
interface Observe {
  observe(value: number): void;
}

/**
 * Counts on the hot path in a plain number and hands the total to prom-client at scrape time:
 * prom-client hashes the label set on every `inc()` of a child, which costs microseconds a job.
 */
class DeferredInc implements Inc {
  private pending = 0;
  constructor(private readonly child: Inc) {}
  inc(value = 1): void {
    this.pending += value;
  }
  flush(): void {
    if (this.pending === 0) return;
    this.child.inc(this.pending);
    this.pending = 0;
  }
}

/** Observations kept until the scrape (or until a few thousand wait), for the same reason. */
class DeferredObserve implements Observe {
  private readonly pending: number[] = [];
  constructor(private readonly child: Observe) {}
  observe(value: number): void {
    this.pending.push(value);
    if (this.pending.length >= 4096) this.flush();
  }
  flush(): void {
    for (const value of this.pending) this.child.observe(value);
    this.pending.length = 0;
  }
}

type Deferred = DeferredInc | DeferredObserve;

const STAGE_LABELS: readonly StageLabelName[] = ['stage', 'queue', 'tenant'];
const OTHER_ERROR_TYPE = 'other';

/** 1 ms .. 5 min, roughly 1-2.5-5 per decade. */
export const DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

/** The metric families a {@link BoundInstance} binds children of. */
interface Families {
  consumed: Counter<StageLabelName>;
  completed: Counter<StageLabelName>;
  failed: Counter<StageLabelName | 'error_type'>;
  retried: Counter<StageLabelName>;
  deadLettered: Counter<StageLabelName>;
  discarded: Counter<StageLabelName>;
  published: Counter<StageLabelName | 'output'>;
  acks: Counter<StageLabelName>;
  duration: Histogram<StageLabelName | 'outcome'>;
}

/** Label children bound once per stage instance. */
class BoundInstance implements InstanceMetrics {
  private readonly consumedChild: Inc;
  private readonly completedChild: Inc;
  private readonly retriedChild: Inc;
  private readonly deadLetteredChild: Inc;
  private readonly discardedChild: Inc;
  private readonly ackChild: Inc;
  private readonly completedDuration: Observe;
  private readonly failedDuration: Observe;
  /** By `error_type` label value: bounded by the cap of {@link StageMetrics}. */
  private readonly failedByType = new Map<string, Inc>();
  private readonly publishedByOutput = new Map<string, Inc>();

  constructor(
    private readonly families: Families,
    private readonly errorTypeLabel: (errorType: string | undefined) => string,
    private readonly labels: StageLabelValues,
    private readonly track: (deferred: Deferred) => void,
  ) {
    const start = (c: Counter<StageLabelName>): Inc => {
      c.inc(labels, 0);
      return this.defer(c.labels(labels));
    };
    this.consumedChild = start(families.consumed);
    this.completedChild = start(families.completed);
    this.retriedChild = start(families.retried);
    this.deadLetteredChild = start(families.deadLettered);
    this.discardedChild = start(families.discarded);
    this.ackChild = start(families.acks);
    const completed = { ...labels, outcome: 'completed' };
    const failed = { ...labels, outcome: 'failed' };
    families.duration.zero(completed);
    families.duration.zero(failed);
    const observe = (child: Observe): Observe => {
      const deferred = new DeferredObserve(child);
      track(deferred);
      return deferred;
    };
    this.completedDuration = observe(families.duration.labels(completed));
    this.failedDuration = observe(families.duration.labels(failed));
  }

  private defer(child: Inc): Inc {
    const deferred = new DeferredInc(child);
    this.track(deferred);
    return deferred;
  }

  consumed(): void {
    this.consumedChild.inc();
  }

  completed(seconds: number): void {
    this.completedChild.inc();
    // prom-client throws on NaN; a metric must never fail the job it measures.
    if (seconds >= 0 && seconds < Infinity) this.completedDuration.observe(seconds);
  }

  failed(seconds: number, errorType: string): void {
    const type = this.errorTypeLabel(errorType);
    let child = this.failedByType.get(type);
    if (child === undefined) {
      child = this.defer(this.families.failed.labels({ ...this.labels, error_type: type }));
      this.failedByType.set(type, child);
    }
    child.inc();
    if (seconds >= 0 && seconds < Infinity) this.failedDuration.observe(seconds);
  }

  retried(): void {
    this.retriedChild.inc();
  }

  deadLettered(): void {
    this.deadLetteredChild.inc();
  }

  discarded(): void {
    this.discardedChild.inc();
  }

  published(output: string): void {
    this.publishedChild(output).inc();
  }

  acked(): void {
    this.ackChild.inc();
  }

  /** The `published` child of `output`, made (and started at 0) on first use. */
  publishedChild(output: string): Inc {
    let child = this.publishedByOutput.get(output);
    if (child === undefined) {
      const labels = { ...this.labels, output };
      this.families.published.inc(labels, 0);
      child = this.defer(this.families.published.labels(labels));
      this.publishedByOutput.set(output, child);
    }
    return child;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`queue depth source did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
