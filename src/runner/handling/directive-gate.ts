import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { BrokerFlags } from '../../flags/broker-flags.js';
import { flagName, type DirectiveFlag } from '../../flags/flag.js';
import type { Job } from '../../job/job.types.js';
import type { Logger } from '../../logging/logger.js';

/**
 * What a stage does with a job before running it, by the directives of its batch and tenant
 * (docs/batches.md): run it, discard it as `cancelled`, or park it until its tenant or batch is
 * resumed.
 */
export type Verdict = 'run' | 'cancel' | 'cancel-job' | 'park-tenant' | 'park-batch';

/** The ids of the jobs cancelled one by one (`job cancel`; JobCancels reads them from their stream). */
export interface CancelledJobs {
  /** A promise only until the source has read every cancel made before it attached. */
  has(id: string): boolean | Promise<boolean>;
  close(): Promise<void>;
}

/** How long a flag's answer is trusted without a control message (a safety net, see DirectiveGate). */
export const DIRECTIVE_TTL_MS = 5 * 60_000;
/** Flags remembered at most; the oldest answers are forgotten first. */
const MAX_ENTRIES = 10_000;

interface Entry {
  on: boolean;
  at: number;
}

/** A directive flag with its name on the broker, which keys what the gate remembers. */
interface Asked {
  flag: DirectiveFlag;
  name: string;
}

/**
 * The stage side of batch and tenant directives, one per process (StageGroup), shared by its
 * runners. A directive is a broker flag (`batch-cancelled`, `batch-paused`, `tenant-paused`: see
 * src/flags/flag.ts), set and cleared by `batch cancel|pause|resume` and `tenant pause|resume`,
 * which then send a `directive` control message.
 *
 * Each flag is probed (a passive declare: no permission needed) the first time a job needs
 * it, and the answer is remembered: a job whose batch and tenant are known costs map lookups.
 * The answer is forgotten when a control message names its batch or tenant, when the control
 * listener or the connection comes back (messages may have been missed), and after
 * {@link DIRECTIVE_TTL_MS}. A probe in flight when its answer is forgotten is not remembered.
 *
 * Precedence: a cancelled batch is cancelled even while paused (so `cancel` ends a paused scan);
 * then a paused tenant; then a paused batch.
 */
export class DirectiveGate {
  private readonly answers = new Map<string, Entry>();
  private readonly asking = new Map<string, Promise<boolean>>();
  /** Bumped by every forget: an answer asked for before it is stale. */
  private generation = 0;
  /** On the attached connection; its probes go one after another on one channel. */
  private flags: BrokerFlags | undefined;

  constructor(
    private readonly prefix: string,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Read on every verdict: a job cancelled by id is discarded unrun (`cancel-job`), before any flag is asked. */
  private cancels: CancelledJobs | undefined;

  /**
   * Probes go to this connection from now on; everything remembered is forgotten. `cancels`:
   * the cancelled job ids read on it (the previous source is closed).
   */
  attach(connection: AmqpConnection, cancels?: CancelledJobs): void {
    void this.flags?.close();
    this.flags = new BrokerFlags(connection, { prefix: this.prefix });
    if (cancels !== undefined) {
      void this.cancels?.close().catch(() => undefined);
      this.cancels = cancels;
    }
    this.forgetAll();
  }

  /**
   * The verdict for a job: synchronous when every marker it needs is remembered. A job cancelled
   * by id costs one set lookup first (docs/job-state.md).
   */
  verdict(job: Pick<Job, 'tenant' | 'meta'> & { id?: string }): Verdict | Promise<Verdict> {
    const cancelled = job.id === undefined ? false : (this.cancels?.has(job.id) ?? false);
    if (cancelled === true) return 'cancel-job';
    if (cancelled === false) return this.flagVerdict(job);
    return cancelled.then((on) => (on ? 'cancel-job' : this.flagVerdict(job)));
  }

  private flagVerdict(job: Pick<Job, 'tenant' | 'meta'>): Verdict | Promise<Verdict> {
    const batch = typeof job.meta?.batch === 'string' ? job.meta.batch : undefined;
    // The hot path of unbatched jobs: one remembered answer, no arrays.
    if (batch === undefined) {
      if (job.tenant === undefined) return 'run';
      const tenantPaused = this.tenantFlag(job.tenant);
      const paused = this.remembered(tenantPaused.name);
      if (paused !== undefined) return paused ? 'park-tenant' : 'run';
      return this.ask(tenantPaused).then((on) => (on ? 'park-tenant' : 'run'));
    }
    const flags: Asked[] = [];
    if (batch !== undefined) flags.push(this.asked({ kind: 'batch-cancelled', batch }));
    if (job.tenant !== undefined) flags.push(this.tenantFlag(job.tenant));
    if (batch !== undefined) flags.push(this.asked({ kind: 'batch-paused', batch }));
    if (flags.length === 0) return 'run';
    const known = flags.map((flag) => this.remembered(flag.name));
    if (known.every((answer) => answer !== undefined)) return decide(batch, job.tenant, known as boolean[]);
    return Promise.all(flags.map((flag, i) => known[i] ?? this.ask(flag))).then((answers) => decide(batch, job.tenant, answers));
  }

  /**
   * Asks the broker again, ignoring what is remembered: a job is parked only while its flag is
   * set now, which narrows the window in which a `resume` could miss it (see batch-directives.ts).
   */
  async stillParked(job: Pick<Job, 'tenant' | 'meta'>, verdict: Verdict): Promise<boolean> {
    const batch = typeof job.meta?.batch === 'string' ? job.meta.batch : undefined;
    const flag =
      verdict === 'park-tenant' && job.tenant !== undefined
        ? this.tenantFlag(job.tenant)
        : verdict === 'park-batch' && batch !== undefined
          ? this.asked({ kind: 'batch-paused', batch })
          : undefined;
    if (flag === undefined) return false;
    this.answers.delete(flag.name);
    return this.ask(flag);
  }

  /** Flags of the tenants seen, named once: a tenant's jobs ask for it one by one. */
  private readonly tenantFlags = new Map<string, Asked>();

  private tenantFlag(tenant: string): Asked {
    let flag = this.tenantFlags.get(tenant);
    if (flag === undefined) {
      if (this.tenantFlags.size >= MAX_ENTRIES) this.tenantFlags.clear();
      this.tenantFlags.set(tenant, (flag = this.asked({ kind: 'tenant-paused', tenant })));
    }
    return flag;
  }

  private asked(flag: DirectiveFlag): Asked {
    return { flag, name: flagName(this.prefix, flag) };
  }

  /** A control message named a batch or a tenant: its flags are read again when next needed. */
  forget(target: { batch?: string; tenant?: string }): void {
    this.generation++;
    const forget = (flag: DirectiveFlag): void => {
      const name = flagName(this.prefix, flag);
      this.answers.delete(name);
      this.asking.delete(name);
    };
    if (target.batch !== undefined) {
      forget({ kind: 'batch-cancelled', batch: target.batch });
      forget({ kind: 'batch-paused', batch: target.batch });
    }
    if (target.tenant !== undefined) forget({ kind: 'tenant-paused', tenant: target.tenant });
  }

  forgetAll(): void {
    this.generation++;
    this.answers.clear();
    this.asking.clear();
  }

  async close(): Promise<void> {
    const flags = this.flags;
    this.flags = undefined;
    await this.cancels?.close().catch(() => undefined);
    this.cancels = undefined;
    await flags?.close();
  }

  private remembered(name: string): boolean | undefined {
    const entry = this.answers.get(name);
    if (entry === undefined) return undefined;
    if (this.now() - entry.at > DIRECTIVE_TTL_MS) {
      this.answers.delete(name);
      return undefined;
    }
    return entry.on;
  }

  /** One probe per flag at a time; BrokerFlags sends them one after another on its channel. */
  private ask({ flag, name }: Asked): Promise<boolean> {
    const pending = this.asking.get(name);
    if (pending !== undefined) return pending;
    const generation = this.generation;
    const asked = this.isSet(flag).then((on) => {
      if (this.asking.get(name) === asked) this.asking.delete(name);
      if (on !== undefined && generation === this.generation) this.remember(name, on);
      // No answer (the connection went): the delivery's channel goes with it, so whether the
      // job runs changes nothing the broker keeps. Run it; the next probe asks again.
      return on ?? false;
    });
    this.asking.set(name, asked);
    return asked;
  }

  private isSet(flag: DirectiveFlag): Promise<boolean | undefined> {
    const flags = this.flags;
    const answer = flags === undefined ? Promise.reject(new Error('directive gate not attached to a connection')) : flags.isSet(flag);
    return answer.catch((err: unknown) => {
      this.log.debug('directive probe failed', { marker: flagName(this.prefix, flag), err: (err as Error).message });
      return undefined;
    });
  }

  private remember(name: string, on: boolean): void {
    if (this.answers.size >= MAX_ENTRIES) {
      const oldest = this.answers.keys().next();
      if (oldest.done !== true) this.answers.delete(oldest.value);
    }
    this.answers.set(name, { on, at: this.now() });
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
