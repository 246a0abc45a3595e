import { openConnection } from '../broker/amqp-connection.js';
import { BatchFold } from '../batch/batch-fold.js';
import { trustedRecord } from '../tracker/tracker.js';
import type { CompiledConfig } from '../config/config.types.js';
import { jobRecordOf } from '../job-state/store-writer.js';
import { MemoryJobStore } from '../job-state/memory-job-store.js';
import { retentionOf } from '../job-state/create-job-store.js';
import type { Logger } from '../logging/logger.js';
import { TrackingReader } from '../tracking-stream/tracking-reader.js';
import { WorkflowFold } from './workflow-fold.js';

/** The workflows as the stream says now, and the job store it folds (whose steps started). */
export interface WorkflowsRead {
  workflows: WorkflowFold;
  jobs: MemoryJobStore;
}

/**
 * Reads the whole tracking stream up to now into a workflow fold and stops: what `workflow
 * status|list|cancel` show, with no tracker running (as `batch status` reads batches).
 */
export async function readWorkflows(config: CompiledConfig, log: Logger): Promise<WorkflowsRead> {
  const connection = await openConnection(config, log, 'stagecoach-workflow-status');
  try {
    const batches = new BatchFold();
    const workflows = new WorkflowFold(batches);
    const jobs = new MemoryJobStore(retentionOf(config));
    const reader = await TrackingReader.open(connection, config, log, (record, userId) => {
      const trusted = trustedRecord(config, record, userId, log);
      const job = jobRecordOf(trusted);
      if (job !== undefined) jobs.applyNow([job]);
      workflows.observe(trusted, batches.apply(trusted));
    });
    await reader.caughtUp();
    await reader.close();
    return { workflows, jobs };
  } finally {
    await connection.close().catch(() => undefined);
  }
}
