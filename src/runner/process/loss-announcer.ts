import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { CompiledConfig } from '../../config/config.types.js';
import { publishControl } from '../../control/send-control.js';
import type { Logger } from '../../logging/logger.js';
import type { LossLedger } from '../loss-ledger.js';

/**
 * When it is sent after a loss or a (re)connection, ms: at once, and again while the other
 * processes may still be re-attaching their control listeners (a control message reaches only
 * the listeners bound when it is published).
 */
const SEND_AT_MS = [0, 1000, 3000];
/** Most ids in one control message. */
const CHUNK = 5000;

/**
 * Tells the other processes what this one lost with a channel or its connection while alive (a
 * broker restart, closed connections): an `excuse` control message with the message ids, so that
 * the process those deliveries come back to takes them for first deliveries, not for a crash's
 * (LossLedger.awaitExcuse). Only a job that was running in a process that died stays a suspect.
 * Jobs the broker's `consumer_timeout` took from this process go out as `timed-out`: where they
 * come back they are dead-lettered (CONSUMER_TIMEOUT), not run again from the start.
 */
export class LossAnnouncer {
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly ledger: LossLedger,
    private readonly config: CompiledConfig,
    private readonly log: Logger,
    private readonly connection: () => AmqpConnection | undefined,
  ) {
    ledger.onLoss = () => this.soon();
  }

  /** Sends the recent losses now and twice more (see SEND_AT_MS); a connection lost meanwhile skips a round. */
  soon(): void {
    this.stop();
    this.timers = SEND_AT_MS.map((ms) => {
      const timer = setTimeout(() => void this.send(), ms);
      timer.unref();
      return timer;
    });
  }

  stop(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers = [];
  }

  private async send(): Promise<void> {
    const connection = this.connection();
    const ids = this.ledger.announcement();
    const timedOut = this.ledger.timedOutAnnouncement();
    if (connection === undefined || (ids.length === 0 && timedOut.size === 0)) return;
    try {
      for (let at = 0; at < ids.length; at += CHUNK) {
        await publishControl(connection, this.config, { command: 'excuse', ids: ids.slice(at, at + CHUNK) });
      }
      for (const [timeoutMs, timedOutIds] of timedOut) {
        for (let at = 0; at < timedOutIds.length; at += CHUNK) {
          const chunk = timedOutIds.slice(at, at + CHUNK);
          await publishControl(connection, this.config, { command: 'timed-out', ids: chunk, timeout_ms: timeoutMs });
        }
      }
    } catch (err) {
      this.log.debug('lost deliveries not announced', { err: (err as Error).message });
    }
  }
}
