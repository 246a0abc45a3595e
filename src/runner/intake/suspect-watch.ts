import type { Channel, GetMessage } from 'amqplib';
import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { Logger } from '../../logging/logger.js';
import { ChannelSupervisor } from '../channels/channel-supervisor.js';
import { closeSource, ConsumerSource } from '../channels/consumer-source.js';
import type { Delivery } from '../channels/delivery.js';
import type { IsolationGate } from './isolation-gate.js';
import type { LinkMember, QueueProbe, SharedChannel, SharedLink } from '../channels/shared-channel.js';

/**
 * One isolated turn runs suspects for this long at most before the work queues get a turn
 * again, and the next turn follows after SUSPECT_BREAK_MS. Isolating costs: every runner of the
 * process waits for its jobs in flight and hands its prefetched deliveries back, and fetches
 * them again after. So a turn takes every suspect waiting (after a crash, all that was in hand
 * comes back at once), not one at a time, and the turns of every runner of the process share
 * one window (IsolationGate); the bound only keeps suspects that keep coming from starving the
 * work queues.
 */
const SUSPECT_TURN_MS = 30_000;
const SUSPECT_BREAK_MS = 500;
/**
 * How long after a job was moved to the suspect queue the watch looks: a crash sends back all
 * that the dead process held at once, and the runner moves it over a few hundred milliseconds;
 * looking a moment later lets one window take all of it, instead of a window for the first
 * suspects and another for the rest. The work queues run meanwhile: the wait costs no throughput.
 */
export const SUSPECT_GATHER_MS = 1000;
/** How often a running instance looks for suspects it was not told about. */
export const DEFAULT_SUSPECT_CHECK_MS = 5000;
/**
 * The longest wait between two looks at a suspect queue declared on first use that was missing
 * at the last look (SuspectWatchOptions.mayBeMissing): the wait doubles from `checkMs` at each
 * look that finds it still missing, up to this (or `checkMs`, when longer). Such a queue is
 * created by the runner that moves a job there, whose own watch looks a moment later (`moved()`),
 * and a process that starts looks at once: only a suspect moved there by another process that
 * died before running it, while this one runs on, waits for this watch's next look: at most
 * 10 minutes later (docs/failures.md).
 */
export const MISSING_SUSPECT_CHECK_MAX_MS = 600_000;

/** The wait before the next look at a suspect queue found missing `misses` times in a row (see MISSING_SUSPECT_CHECK_MAX_MS). */
export function missingSuspectCheckMs(checkMs: number, misses: number): number {
  return Math.max(checkMs, Math.min(MISSING_SUSPECT_CHECK_MAX_MS, checkMs * 2 ** misses));
}

export interface SuspectWatchOptions {
  /** The instance's suspect queue. */
  queue: string;
  /** Declares (or, with broker-enforced tenants, checks) the topology again before healing: a deleted queue comes back. */
  declare(connection: AmqpConnection): Promise<void>;
  log: Logger;
  gate: IsolationGate;
  /** Whether the instance takes work now (running): suspects wait otherwise. */
  running(): boolean;
  /** Runs one suspect with nothing else in flight (the gate suspended everything first). */
  runAlone(delivery: Delivery): Promise<void>;
  onFatal(err: Error): void;
  /** Told what was in hand when the channel closed, per queue how many more never arrived (LossLedger), and what the broker timed out. */
  lost(messageIds: string[], unseen?: ReadonlyMap<string, number>, timedOut?: ConsumerSource['timedOut']): void;
  /** Told of every suspect as it arrives (see LossLedger.arrived). */
  arrived(queue: string, message: GetMessage): void;
  /** Between looks, read at each (a pooled process spreads its tenants' looks thinner as it grows). @defaultValue DEFAULT_SUSPECT_CHECK_MS */
  checkMs?: number | (() => number);
  /** Pooled: `basic.get` on this channel, shared with other tenants' runners; the queue looked at through the probe (a passive declare of a missing queue would close the shared channel). */
  shared?: { channel: SharedChannel; probe: QueueProbe };
  /**
   * Pooled: the queue is declared on first use (SuspectDeclaration), so most likely missing: it is
   * asked about on the probe's lanes for such queues, and once found missing looked at again
   * only after a wait that grows (MISSING_SUSPECT_CHECK_MAX_MS), or a moment after `moved()`.
   * @defaultValue false
   */
  mayBeMissing?: boolean;
}

/** Passive checks and `basic.get` of suspects, on a channel of their own (a 404 closes only it). */
interface SuspectChannel {
  channel: Channel;
  source: ConsumerSource;
}

/**
 * Looks for suspects and runs them alone: when the suspect channel opens, when the instance moved
 * a job there (`moved()`, a moment later), and every `checkMs` (suspects come back from the delay ladder after
 * a retry, or were moved by an instance that died before running them). With suspects waiting, it
 * asks the process-wide gate to isolate, then takes them one by one with `basic.get`, so that no
 * suspect is ever in hand while other jobs run, nor another job while a suspect runs. A queue
 * declared on first use (`mayBeMissing`) and found missing is looked at less and less often
 * (MISSING_SUSPECT_CHECK_MAX_MS) until its runner moves a job there.
 */
export class SuspectWatch implements LinkMember {
  readonly supervisor: ChannelSupervisor<SuspectChannel>;
  private joined = false;
  private timer: NodeJS.Timeout | undefined;
  /** When `timer` fires. */
  private dueAt = 0;
  private checking = false;
  private pending = false;
  /** The last turn ran out of time with suspects left. */
  private unfinished = false;
  private closed = false;
  /** A `basic.get` is on its way: its answer, a suspect, may be lost with the channel. */
  private getting = false;
  /** Whether its queue is known to exist (else asked about as `mayBeMissing`): found there at the last look, or a job moved there. */
  private known: boolean;
  /** Looks in a row that found its queue missing (`mayBeMissing` only). */
  private misses = 0;
  /** Found missing: no look before this time but after `moved()` (see MISSING_SUSPECT_CHECK_MAX_MS). */
  private missingUntil = 0;
  /** `moved()` calls so far: a look asked before the last of them says nothing of the queue now. */
  private moves = 0;

  constructor(private readonly options: SuspectWatchOptions) {
    this.known = options.mayBeMissing !== true;
    this.supervisor = new ChannelSupervisor<SuspectChannel>({
      name: 'suspect',
      log: options.log,
      onFatal: options.onFatal,
      isOpen: (suspects) => !suspects.source.closed,
      open: (connection, lost, healing) => this.openChannel(connection, lost, healing),
      close: (suspects) => closeSource(suspects.source),
      onOpen: () => this.mayWait(0),
    });
  }

  get open(): boolean {
    return this.current !== undefined;
  }

  /** When the next look is due (ms since the epoch); undefined when none is planned (closed, or waiting to run again). */
  get nextLook(): number | undefined {
    return this.timer === undefined ? undefined : this.dueAt;
  }

  private get current(): SuspectChannel | undefined {
    return this.options.shared === undefined ? this.supervisor.current : this.options.shared.channel.current;
  }

  attach(connection: AmqpConnection): Promise<unknown> {
    const shared = this.options.shared;
    if (shared === undefined) return this.supervisor.attach(connection);
    if (!this.joined) {
      this.joined = true;
      shared.channel.join(this);
    } else this.mayWait(0);
    return Promise.resolve();
  }

  /** Pooled: the shared channel opened a generation. */
  linkOpened(_link: SharedLink): void {
    this.mayWait(0);
  }

  linkClosed(_link: SharedLink): void {
    // Nothing of it is ours between turns; a turn in progress ends on its failed get, whose
    // suspect may have been on the way (the shared channel recorded what was in hand).
    if (this.getting) this.options.lost([], this.unseenGet());
  }

  detach(): void {
    if (this.options.shared === undefined) this.supervisor.detach();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.options.shared === undefined) await this.supervisor.close();
    else this.options.shared.channel.leave(this);
  }

  /**
   * Suspects may be waiting: look in `delayMs`, or sooner when a look is due sooner already. A
   * queue found missing is not looked at before its wait is over: a reconnection, a resume or an
   * isolation window of 10,000 tenants would otherwise ask about 10,000 missing queues at once.
   */
  mayWait(delayMs: number): void {
    if (this.closed) return;
    if (this.checking) {
      this.pending = true;
      return;
    }
    const now = Date.now();
    const at = Math.max(now + delayMs, this.missingUntil);
    if (this.timer !== undefined && this.dueAt <= at) return;
    clearTimeout(this.timer);
    this.dueAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.check();
    }, at - now);
    this.timer.unref();
  }

  /**
   * A job was just moved to the suspect queue: look soon, once the rest of its crash has come
   * (SUSPECT_GATHER_MS); at once while a window is open (moved as its runner was suspended), to
   * take a turn in it.
   */
  moved(): void {
    // Its runner declared the queue before moving the job there.
    this.moves += 1;
    this.known = true;
    this.misses = 0;
    this.missingUntil = 0;
    this.mayWait(this.options.gate.isolating ? 0 : SUSPECT_GATHER_MS);
  }

  private async check(): Promise<void> {
    // Not running (paused, quiet, stopping): looked at again when it resumes.
    if (!this.options.running()) return;
    this.checking = true;
    this.pending = false;
    try {
      if ((await this.waiting()) > 0) await this.options.gate.runAlone(() => this.runSuspects());
    } catch (err) {
      // The suspect channel closed (its queue was deleted): its supervisor heals it.
      this.options.log.debug('could not look for suspects', { queue: this.options.queue, err: (err as Error).message });
    } finally {
      this.checking = false;
      if (this.misses > 0) this.missingUntil = Date.now() + missingSuspectCheckMs(this.checkMs(), this.misses);
      this.mayWait(this.unfinished ? SUSPECT_BREAK_MS : this.pending ? SUSPECT_GATHER_MS : this.checkMs());
    }
  }

  private checkMs(): number {
    const { checkMs } = this.options;
    return typeof checkMs === 'function' ? checkMs() : (checkMs ?? DEFAULT_SUSPECT_CHECK_MS);
  }

  /** Inside the gate: nothing else of the process is in hand. Takes suspects one by one. */
  private async runSuspects(): Promise<void> {
    this.unfinished = false;
    const until = Date.now() + SUSPECT_TURN_MS;
    while (this.options.running()) {
      if (Date.now() >= until) {
        this.unfinished = true;
        return;
      }
      const suspects = this.current;
      if (suspects === undefined) return;
      // The previous suspect's ack goes out first: on one channel the broker handles frames in
      // order, so it is settled before the next suspect (which may kill the process) arrives.
      suspects.source.flush();
      this.getting = true;
      let message: GetMessage | false;
      try {
        message = await suspects.channel.get(this.options.queue, { noAck: false });
      } finally {
        this.getting = false;
      }
      if (message === false) return;
      suspects.source.delivered(message);
      this.options.arrived(this.options.queue, message);
      await this.options.runAlone({ message, source: suspects.source, input: 'suspect', queue: this.options.queue, permit: undefined });
    }
  }

  /** A get on its way when the channel closed: at most one suspect lost unseen. */
  private unseenGet(): Map<string, number> {
    return new Map([[this.options.queue, 1]]);
  }

  /** Suspects in the queue now; 0 without a channel (its supervisor, or the pool, heals it). */
  private async waiting(): Promise<number> {
    const shared = this.options.shared;
    if (shared !== undefined) {
      if (shared.channel.current === undefined) return 0;
      const moves = this.moves;
      const count = await shared.probe.messageCount(this.options.queue, { mayBeMissing: !this.known });
      // A job moved there meanwhile: the queue exists now, whatever this answer says.
      if (this.options.mayBeMissing === true && moves === this.moves) {
        this.known = count !== undefined;
        this.misses = count === undefined ? this.misses + 1 : 0;
        if (count !== undefined) this.missingUntil = 0;
      }
      return count ?? 0;
    }
    const suspects = this.supervisor.current;
    return suspects === undefined ? 0 : (await suspects.channel.checkQueue(this.options.queue)).messageCount;
  }

  private async openChannel(connection: AmqpConnection, lost: (reason: string) => void, healing: boolean): Promise<SuspectChannel> {
    if (healing) await this.options.declare(connection);
    const channel = await connection.createChannel();
    const suspects: SuspectChannel = { channel, source: new ConsumerSource(channel) };
    channel.on('error', (err: Error) => {
      suspects.source.failed(err);
      this.options.log.error('suspect channel error', { queue: this.options.queue, err: err.message });
    });
    channel.on('close', () => {
      const expected = suspects.source.closed;
      this.options.lost(suspects.source.abandon(), this.getting ? this.unseenGet() : undefined, suspects.source.timedOut);
      if (!expected) lost('suspect channel closed');
    });
    return suspects;
  }
}
