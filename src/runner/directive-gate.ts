import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ExchangeProbe } from '../broker/exchange-probe.js';
import type { Job } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';

/**
 * What a stage does with a job before running it, by the directives of its batch and tenant
 * (docs/batches.md): run it, discard it as `cancelled`, or park it until its tenant or batch is
 * resumed.
 */
export type Verdict = 'run' | 'cancel' | 'park-tenant' | 'park-batch';

/** How long a marker's answer is trusted without a control message (a safety net, see DirectiveGate). */
export const DIRECTIVE_TTL_MS = 5 * 60_000;
/** Markers remembered at most; the oldest answers are forgotten first. */
const MAX_ENTRIES = 10_000;

interface Entry {
  on: boolean;
  at: number;
}

/**
 * The stage side of batch and tenant directives, one per process (StageGroup), shared by its
 * runners. A directive is a marker exchange on the broker (`<prefix>.batch-cancelled.<B>`,
 * `<prefix>.batch-paused.<B>`, `<prefix>.tenant-paused.<T>`), written by `batch cancel|pause|
 * resume` and `tenant pause|resume`, which then send a `directive` control message.
 *
 * Each marker is probed (a passive declare: no permission needed) the first time a job needs
 * it, and the answer is remembered: a job whose batch and tenant are known costs map lookups.
 * The answer is forgotten when a control message names its batch or tenant, when the control
 * listener or the connection comes back (messages may have been missed), and after
 * {@link DIRECTIVE_TTL_MS}. A probe in flight when its answer is forgotten is not remembered.
 *
 * Precedence: a cancelled batch is cancelled even while paused (so `cancel` ends a paused scan);
 * then a paused tenant; then a paused batch.
 */
export class DirectiveGate {
  private readonly names: BrokerNames;
  private readonly answers = new Map<string, Entry>();
  private readonly asking = new Map<string, Promise<boolean>>();
  /** Bumped by every forget: an answer asked for before it is stale. */
  private generation = 0;
  private probe: ExchangeProbe | undefined;
  private connection: AmqpConnection | undefined;

  constructor(
    prefix: string,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.names = new BrokerNames(prefix);
  }

  /** Probes go to this connection from now on; everything remembered is forgotten. */
  attach(connection: AmqpConnection): void {
    void this.probe?.close();
    this.probe = undefined;
    this.connection = connection;
    this.forgetAll();
  }

  /** The verdict for a job: synchronous when every marker it needs is remembered. */
  verdict(job: Pick<Job, 'tenant' | 'meta'>): Verdict | Promise<Verdict> {
    const batch = typeof job.meta?.batch === 'string' ? job.meta.batch : undefined;
    // The hot path of unbatched jobs: one remembered answer, no arrays.
    if (batch === undefined) {
      if (job.tenant === undefined) return 'run';
      const marker = this.tenantMarker(job.tenant);
      const paused = this.remembered(marker);
      if (paused !== undefined) return paused ? 'park-tenant' : 'run';
      return this.ask(marker).then((on) => (on ? 'park-tenant' : 'run'));
    }
    const markers: string[] = [];
    if (batch !== undefined) markers.push(this.names.batchMarker('cancelled', batch));
    if (job.tenant !== undefined) markers.push(this.tenantMarker(job.tenant));
    if (batch !== undefined) markers.push(this.names.batchMarker('paused', batch));
    if (markers.length === 0) return 'run';
    const known = markers.map((marker) => this.remembered(marker));
    if (known.every((answer) => answer !== undefined)) return decide(batch, job.tenant, known as boolean[]);
    return Promise.all(markers.map((marker, i) => known[i] ?? this.ask(marker))).then((answers) => decide(batch, job.tenant, answers));
  }

  /**
   * Asks the broker again, ignoring what is remembered: a job is parked only while its marker is
   * there now, which narrows the window in which a `resume` could miss it (see batch-directives.ts).
   */
  async stillParked(job: Pick<Job, 'tenant' | 'meta'>, verdict: Verdict): Promise<boolean> {
    const batch = typeof job.meta?.batch === 'string' ? job.meta.batch : undefined;
    const marker =
      verdict === 'park-tenant' && job.tenant !== undefined
        ? this.names.tenantPauseMarker(job.tenant)
        : verdict === 'park-batch' && batch !== undefined
          ? this.names.batchMarker('paused', batch)
          : undefined;
    if (marker === undefined) return false;
    this.answers.delete(marker);
    return this.ask(marker);
  }

  /** Marker names of the tenants seen, made once: a tenant's jobs ask for it one by one. */
  private readonly tenantMarkers = new Map<string, string>();

  private tenantMarker(tenant: string): string {
    let marker = this.tenantMarkers.get(tenant);
    if (marker === undefined) {
      if (this.tenantMarkers.size >= MAX_ENTRIES) this.tenantMarkers.clear();
      this.tenantMarkers.set(tenant, (marker = this.names.tenantPauseMarker(tenant)));
    }
    return marker;
  }

  /** A control message named a batch or a tenant: its markers are read again when next needed. */
  forget(target: { batch?: string; tenant?: string }): void {
    this.generation++;
    const forget = (marker: string): void => {
      this.answers.delete(marker);
      this.asking.delete(marker);
    };
    if (target.batch !== undefined) {
      forget(this.names.batchMarker('cancelled', target.batch));
      forget(this.names.batchMarker('paused', target.batch));
    }
    if (target.tenant !== undefined) forget(this.names.tenantPauseMarker(target.tenant));
  }

  forgetAll(): void {
    this.generation++;
    this.answers.clear();
    this.asking.clear();
  }

  async close(): Promise<void> {
    const probe = this.probe;
    this.probe = undefined;
    this.connection = undefined;
    await probe?.close();
  }

  private remembered(marker: string): boolean | undefined {
    const entry = this.answers.get(marker);
    if (entry === undefined) return undefined;
    if (this.now() - entry.at > DIRECTIVE_TTL_MS) {
      this.answers.delete(marker);
      return undefined;
    }
    return entry.on;
  }

  /** One probe per marker at a time; probes go one after another on the probe's channel. */
  private ask(marker: string): Promise<boolean> {
    const pending = this.asking.get(marker);
    if (pending !== undefined) return pending;
    const generation = this.generation;
    const asked = this.exists(marker).then((on) => {
      if (this.asking.get(marker) === asked) this.asking.delete(marker);
      if (on !== undefined && generation === this.generation) this.remember(marker, on);
      // No answer (the connection went): the delivery's channel goes with it, so whether the
      // job runs changes nothing the broker keeps. Run it; the next probe asks again.
      return on ?? false;
    });
    this.asking.set(marker, asked);
    return asked;
  }

  private queue: Promise<unknown> = Promise.resolve();

  private exists(marker: string): Promise<boolean | undefined> {
    const run = async (): Promise<boolean> => {
      const connection = this.connection;
      if (connection === undefined) throw new Error('directive gate not attached to a connection');
      this.probe ??= new ExchangeProbe(connection);
      return this.probe.exists(marker);
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result.catch((err: unknown) => {
      this.log.debug('directive probe failed', { marker, err: (err as Error).message });
      return undefined;
    });
  }

  private remember(marker: string, on: boolean): void {
    if (this.answers.size >= MAX_ENTRIES) {
      const oldest = this.answers.keys().next();
      if (oldest.done !== true) this.answers.delete(oldest.value);
    }
    this.answers.set(marker, { on, at: this.now() });
  }
}

/** Answers in the order verdict() asked: [cancelled?], [tenant paused?], [batch paused?]. */
function decide(batch: string | undefined, tenant: string | undefined, answers: boolean[]): Verdict {
  const [cancelled, tenantPaused, batchPaused] =
    batch === undefined ? [false, answers[0], false] : tenant === undefined ? [answers[0], false, answers[1]] : answers;
  if (cancelled === true) return 'cancel';
  if (tenantPaused === true) return 'park-tenant';
  return batchPaused === true ? 'park-batch' : 'run';
}
