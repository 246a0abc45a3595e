import { hostname } from 'node:os';
import { TrackingFollower } from '../tracker/tracking-follower.js';
import type { CompiledConfig } from '../config/config.types.js';
import { EventPublisher } from '../events/event-publisher.js';
import { createJobStore } from '../job-state/create-job-store.js';
import type { JobStore } from '../job-state/job-store.js';
import type { Logger } from '../logging/logger.js';
import { Leadership } from './leadership.js';
import type { OverlapSources } from './overlap.js';
import { ScheduleFollower } from './schedule-follower.js';
import { SchedulerTerm } from './scheduler-term.js';

export interface SchedulerOptions {
  log: Logger;
  /** The configuration as it is now; by default the one given to `create`. */
  config?: () => Promise<CompiledConfig>;
  /** The schedules as this process reads them (the admin API shares its follower); by default its own. */
  follower?: ScheduleFollower;
  /** Where overlap is read (the admin API shares its job store and batch fold); by default its own. */
  overlap?: OverlapSources;
  /** How often a process that is not the leader asks again, ms. @defaultValue CANDIDATE_RETRY_MS */
  retryMs?: number;
}

/**
 * The scheduler of a process (`stagecoach scheduler`, and inside `dev` and `admin`): it asks for
 * the leadership (Leadership) and, while it holds it, fires every schedule (SchedulerTerm). Any
 * number may run; one leads at a time, another takes over within 30 s when it goes.
 *
 * States: `idle` (created), `running` (asking or leading), `stopping`, `stopped`; `stop()` keeps
 * its promise and is safe to call twice.
 */
export class Scheduler {
  private state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle';
  private stopping: Promise<void> | undefined;
  private readonly leadership: Leadership;
  private readonly follower: ScheduleFollower;
  private readonly ownFollower: boolean;
  private readonly events: EventPublisher;
  private readonly overlap: OverlapSources;
  private readonly closeOverlap: () => Promise<void>;

  constructor(config: CompiledConfig, options: SchedulerOptions) {
    const { log } = options;
    this.follower = options.follower ?? new ScheduleFollower(config, log);
    this.ownFollower = options.follower === undefined;
    this.events = new EventPublisher(config, { source: 'stagecoach/scheduler', log });
    if (options.overlap !== undefined) {
      this.overlap = options.overlap;
      this.closeOverlap = () => Promise.resolve();
    } else {
      // Read only when a schedule's overlap policy asks: a scheduler of `allow` schedules never replays the tracking stream.
      const tracking = new TrackingFollower(config, log);
      const table: JobStore | undefined = config.tracking.store.kind === 'postgres' ? createJobStore(config) : undefined;
      this.overlap = { jobs: () => (table === undefined ? tracking.jobs() : Promise.resolve(table)), batches: () => tracking.fold() };
      this.closeOverlap = async () => {
        await tracking.close();
        await table?.close();
      };
    }
    const current = options.config ?? (() => Promise.resolve(config));
    const processName = `${hostname()}:${process.pid}`;
    this.leadership = new Leadership(
      config,
      log,
      async (connection, lost) => {
        const term = new SchedulerTerm(
          { config: current, follower: this.follower, overlap: this.overlap, events: this.events, log, process: processName },
          connection,
        );
        await term.run(lost);
      },
      options.retryMs,
    );
  }

  /** Whether this process leads now. */
  get isLeader(): boolean {
    return this.leadership.isLeader;
  }

  /** The schedules as this process reads them. */
  get schedules(): ScheduleFollower {
    return this.follower;
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'running';
    this.follower.start();
    this.leadership.start();
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.state = 'stopping';
      await this.leadership.stop();
      await this.events.close();
      await this.closeOverlap();
      if (this.ownFollower) await this.follower.close();
      this.state = 'stopped';
    })();
    return this.stopping;
  }
}
