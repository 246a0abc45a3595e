import type { BatchFold } from '../batch/batch-fold.js';
import type { JobStore } from '../job-state/job-store.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { PayloadStore } from '../payload/payload-store.js';
import type { ManagementClient } from '../broker-management/management-client.js';
import type { StageEndpoints } from '../topology/topology.types.js';
import type { WorkflowAdvancer } from '../workflow/workflow-advancer.js';
import type { ScheduleFollower } from '../schedule/schedule-follower.js';
import type { ConfigFile, Serializer } from './config-file.js';

/** What every handler of the admin API works with. */
export interface AdminContext {
  /** The configuration file: read again for every request, so a change made by anyone is seen. */
  configFile: ConfigFile;
  /** The configured stages' inputs and outputs, loaded once at start (the queues `provision` knows). */
  stages: readonly StageEndpoints[];
  log: Logger;
  /** Every change runs through it, one at a time. */
  serializer: Serializer;
  /** The management API of a configuration (its URL may change with the file). */
  api(config: CompiledConfig): ManagementClient;
  /** Batch state, followed from the tracking stream by one reader for the server's life (TrackingFollower). */
  batches: { fold(): Promise<BatchFold> };
  /**
   * The workflows (docs/workflows.md) as the server's tracking reader folds them, up to date; the
   * same reader advances them while it holds the workflow lock.
   */
  workflows(): Promise<WorkflowAdvancer>;
  /** The job store (docs/job-state.md): the PostgreSQL table, or the follower's memory store, up to date. */
  jobs(): Promise<JobStore>;
  /**
   * The payload store of the configuration as it was at start (a change of `payloads.store` needs
   * a restart): dead letters and unroutable jobs sent by reference are shown with their arguments.
   */
  payloads: PayloadStore;
  /** The schedules (docs/schedules.md), followed from the schedules stream by one reader for the server's life. */
  schedules: ScheduleFollower;
}
