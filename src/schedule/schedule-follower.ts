import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import type { ScheduleBook } from './schedule-book.js';
import type { ScheduleRecord } from './schedule-records.js';
import { ScheduleStream } from './schedule-stream.js';

/** How long a request may wait for the book to be up to date (the replay, a mark's round trip). */
export const SCHEDULE_WAIT_MS = 15_000;

/**
 * The schedules as a long-running process knows them (the scheduler, the admin API): one reader
 * of the schedules stream on a connection of its own, replayed once and then followed. `book()`
 * brings it up to date first (a mark written and read back), so a request made right after a
 * registration sees it.
 *
 * It heals: a lost connection drops the reader, and the next `book()` replays the stream on a new
 * connection into a new book; `onBook` listeners learn of every new book once it is replayed.
 */
export class ScheduleFollower {
  private session: Promise<ScheduleStream> | undefined;
  private closed = false;
  private readonly listeners = new Set<(book: ScheduleBook) => void>();

  constructor(
    private readonly config: CompiledConfig,
    private readonly log: Logger,
    private readonly waitMs = SCHEDULE_WAIT_MS,
  ) {}

  /** Starts the replay in the background (a failure is logged; the next request tries again). */
  start(): void {
    this.synced().catch((err: unknown) =>
      this.log.warn('schedules stream not read (tried again at the next request)', { err: (err as Error).message }),
    );
  }

  /** Told of each new book, once replayed up to date. */
  onBook(listener: (book: ScheduleBook) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The book with every record appended before the call.
   * @throws StagecoachError CONNECTION_FAILED past the wait bound, or when the broker cannot be reached.
   */
  async book(): Promise<ScheduleBook> {
    return (await this.synced()).book;
  }

  /** Appends a record and returns the book once it holds it. */
  async append(record: ScheduleRecord): Promise<ScheduleBook> {
    return this.within(async () => {
      const stream = await this.current();
      await stream.append(record);
      await stream.caughtUp();
      return stream.book;
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const stream = await this.session?.catch(() => undefined);
    this.session = undefined;
    await stream?.close();
  }

  private synced(): Promise<ScheduleStream> {
    return this.within(async () => {
      const stream = await this.current();
      await stream.caughtUp();
      return stream;
    });
  }

  private async within<T>(work: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new StagecoachError(
              'CONNECTION_FAILED',
              `the schedules stream was not read up to date within ${this.waitMs / 1000} s (broker slow or away): ask again`,
            ),
          ),
        this.waitMs,
      );
    });
    try {
      return await Promise.race([work(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private current(): Promise<ScheduleStream> {
    if (this.closed) return Promise.reject(new StagecoachError('CONNECTION_FAILED', 'the schedule follower is closed'));
    if (this.session === undefined) {
      const opening: Promise<ScheduleStream> = this.open(() => {
        // The connection is gone: the next request replays on a new one.
        if (this.session === opening) this.session = undefined;
      });
      this.session = opening;
      opening.catch(() => {
        if (this.session === opening) this.session = undefined;
      });
    }
    return this.session;
  }

  private async open(onLost: () => void): Promise<ScheduleStream> {
    const connection: AmqpConnection = await openConnection(this.config, this.log, 'stagecoach-schedules');
    connection.on('close', onLost);
    try {
      const stream = await ScheduleStream.open(connection, this.config, this.log, undefined, connection);
      await stream.caughtUp();
      for (const listener of this.listeners) listener(stream.book);
      return stream;
    } catch (err) {
      await connection.close().catch(() => undefined);
      throw err;
    }
  }
}
