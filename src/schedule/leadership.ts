import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import { BrokerFlags } from '../flags/broker-flags.js';
import type { HeldFlag } from '../flags/flag.js';
import type { Logger } from '../logging/logger.js';

/** How often a process that is not the leader asks for the leadership again. */
export const CANDIDATE_RETRY_MS = 5_000;
/**
 * The AMQP heartbeat of the leader's connection, in seconds: a leader cut off from the broker
 * without a reset (a black-holed network) loses its connection, and with it the leadership,
 * within about two heartbeats, so another process leads within 30 s.
 */
export const LEADER_HEARTBEAT_SECONDS = 8;

/** What the leader runs: called with the connection that holds the leadership; its promise ends with the leadership. */
export type LeaderTerm = (connection: AmqpConnection, lost: Promise<void>) => Promise<void>;

/** What is led: the flag held, and how logs and the broker's connection list name it. */
export interface LeaderRole {
  flag: HeldFlag;
  /** In logs: `<what>: this process is the leader`. */
  what: string;
  /** The connection's name on the broker. */
  connectionName: string;
}

/** The scheduler's leadership, `<prefix>.scheduler-leader`. */
export const SCHEDULER_ROLE: LeaderRole = {
  flag: { kind: 'scheduler-leader' },
  what: 'scheduler',
  connectionName: 'stagecoach-scheduler-leader',
};

/**
 * One process at a time is the scheduler's leader (OJS cron 7), elected through the broker
 * (the same election picks the one admin server that delivers webhooks: another LeaderRole)
 * without any other server: the leader's connection holds an exclusive queue,
 * `<prefix>.scheduler-leader`. The broker lets one connection at a time declare it and deletes it
 * when that connection closes, however it closes: a killed process, a lost network, a broker
 * restart. The others try again every CANDIDATE_RETRY_MS.
 *
 * Renewal (OJS cron 7.2) is the connection's heartbeat: a leader whose connection is gone has
 * lost the leadership, and its term ends (`lost` resolves); everything the leader sends goes on
 * that same connection, so once the broker has let another process lead, nothing more of the
 * old leader can arrive.
 */
export class Leadership {
  private state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle';
  private connection: AmqpConnection | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private leading = false;

  constructor(
    private readonly config: CompiledConfig,
    private readonly log: Logger,
    private readonly term: LeaderTerm,
    private readonly retryMs = CANDIDATE_RETRY_MS,
    private readonly role: LeaderRole = SCHEDULER_ROLE,
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'running';
    this.loop = this.run();
  }

  /** Gives the leadership up (closing its connection) and stops asking. The stop promise is kept. */
  stop(): Promise<void> {
    if (this.state === 'running') {
      this.state = 'stopping';
      this.wake?.();
      void this.connection?.close().catch(() => undefined);
    }
    return (this.loop ?? Promise.resolve()).then(() => {
      this.state = 'stopped';
    });
  }

  private async run(): Promise<void> {
    while (this.state === 'running') {
      try {
        await this.candidate();
      } catch (err) {
        if (this.state === 'running') {
          this.log.warn(`${this.role.what}: not leading (the broker away, or the term failed); asking again`, {
            err: (err as Error).message,
          });
        }
      }
      if (this.state === 'running') await this.pause();
    }
  }

  /** One connection: asked for the leadership until held, then the term, until the connection goes. */
  private async candidate(): Promise<void> {
    const settings = { ...this.config, broker: { ...this.config.broker, heartbeat: LEADER_HEARTBEAT_SECONDS } };
    const connection = await openConnection(settings, this.log, this.role.connectionName);
    this.connection = connection;
    const lost = new Promise<void>((resolve) => connection.once('close', () => resolve()));
    connection.on('error', () => undefined);
    const flags = new BrokerFlags(connection, { prefix: this.config.prefix });
    try {
      for (;;) {
        if (this.state !== 'running') return;
        const outcome = await flags.hold(this.role.flag);
        if (outcome === 'refused') {
          throw new Error(
            `this broker user may not declare ${flags.name(this.role.flag)}: the ${this.role.what} needs configure permission on it`,
          );
        }
        if (outcome === 'held') break;
        if (await Promise.race([this.pause().then(() => false), lost.then(() => true)])) return;
      }
      this.leading = true;
      this.log.info(`${this.role.what}: this process is the leader`);
      await this.term(connection, lost);
    } finally {
      const was = this.leading;
      this.leading = false;
      if (was) this.log.warn(`${this.role.what}: leadership ended`, { stopping: this.state !== 'running' });
      await flags.close();
      await connection.close().catch(() => undefined);
      this.connection = undefined;
    }
  }

  private pause(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.retryMs);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
