import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { CompiledConfig } from '../../config/config.types.js';
import type { Logger } from '../../logging/logger.js';
import { identitiesOf } from '../../security/broker-users.js';
import { TrackingReader } from '../../tracking-stream/tracking-reader.js';
import type { TrackingRecord } from '../../tracking-stream/tracking-report.js';

/**
 * The stage side of `job cancel` (docs/job-state.md): the ids of the cancelled jobs, read from
 * the start of the `<prefix>.job-cancels` stream and followed, so that a stage meeting one of
 * them discards it unrun. A delivery costs one set lookup (10,000 cancelled ids or none alike);
 * the stream is read to its end (a `mark` written and read back) before {@link ready} resolves,
 * so a job cancelled before the stage attached is known before its first job runs.
 *
 * With `security.tenantUsers` only a cancel written by the operator or the internal user counts
 * (the broker-validated `user_id`): a tenant's stage user may write the stream (its marks), not
 * cancel another tenant's jobs.
 */
/**
 * How long a stage's jobs wait for the stream to be read to its end, ms. Past it they run and the
 * cancels apply as they are read: a stream the broker is slow to serve (a replica catching up
 * after a node went down) must not hold every job of the process, any more than one it cannot
 * read at all does.
 */
export const CANCELS_CATCH_UP_MS = 5000;

export class JobCancels {
  private readonly ids = new Set<string>();
  private reader: TrackingReader | undefined;
  readonly ready: Promise<void>;
  private isReady = false;
  /** Resolves when the stream was read to its end, or CANCELS_CATCH_UP_MS passed first. */
  private readonly waited: Promise<void>;

  constructor(connection: AmqpConnection, config: CompiledConfig, log: Logger) {
    const trusted = config.security.tenantUsers ? identitiesOf(config) : undefined;
    this.ready = (async () => {
      this.reader = await TrackingReader.open(
        connection,
        config,
        log,
        (record, userId) => {
          if (!isJobCancel(record)) return;
          if (trusted !== undefined && !(userId !== undefined && trusted.trusted(userId))) {
            log.warn('job cancel ignored: not written by the operator or the internal user', { job_id: record.job, user_id: userId });
            return;
          }
          this.ids.add(record.job);
        },
        'job-cancels',
      );
      await this.reader.caughtUp();
      this.isReady = true;
    })();
    // Observed here; a stage whose stream cannot be read runs its jobs (logged), as a directive probe that fails does.
    this.ready.catch((err: unknown) => log.warn('job-cancels stream not read: cancelled jobs may run', { err: (err as Error).message }));
    this.waited = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        if (!this.isReady)
          log.warn('job-cancels stream not read to its end in time: jobs run, cancels apply as they are read', {
            waited_ms: CANCELS_CATCH_UP_MS,
          });
        resolve();
      }, CANCELS_CATCH_UP_MS);
      timer.unref();
      this.ready.then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        () => {
          clearTimeout(timer);
          resolve();
        },
      );
    });
  }

  /** Whether the job was cancelled; a promise only until the stream was read to its end (at most CANCELS_CATCH_UP_MS). */
  has(id: string): boolean | Promise<boolean> {
    if (this.isReady) return this.ids.has(id);
    return this.waited.then(() => this.ids.has(id));
  }

  /** How many cancelled ids it holds. */
  get size(): number {
    return this.ids.size;
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.reader?.close();
  }
}

function isJobCancel(record: TrackingRecord): record is TrackingRecord & { kind: 'directive'; job: string } {
  return record.kind === 'directive' && record.action === 'cancel' && typeof record.job === 'string';
}
