import { typeAllowed } from '../broker/job-router.js';
import type { CompiledConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { ConfigError, StagecoachError } from '../errors/errors.js';
import { childTraceparent } from '../job/trace-context.js';
import { uuidv7 } from '../job/uuid-v7.js';
import type { WorkflowSpec } from '../job/workflow.types.js';
import type { WorkflowRecord } from '../tracking-stream/tracking-report.js';
import { checkBatchId } from '../util/batch-id.js';
import { checkTenantSlug } from '../util/tenant-slug.js';
import { jobNodes, planOf } from './workflow-plan.js';
import { checkWorkflow } from './workflow-spec.js';

/** How a workflow is started, besides its definition. */
export interface WorkflowStartOptions {
  /** Its id, which is also its batch's (a batch id); a fresh UUIDv7 by default. The same id again starts nothing new. */
  id?: string;
  /** The tenant of every step (a tenant-scoped queue needs one). */
  tenant?: string;
  /** The W3C traceparent its steps continue; a new trace by default. */
  traceparent?: string;
  /** The job whose handler starts it (`ctx.emit`). */
  parent?: string;
}

/**
 * The record that starts a workflow (docs/workflows.md), once its definition is checked against
 * the configuration: every job's queue is configured (under `strict_queues`) and allows its type,
 * and a tenant-scoped queue has the workflow's tenant. Nothing is published here: appending the
 * record starts the workflow, and the process holding the workflow lock publishes its first steps.
 * @throws StagecoachError `INVALID_REQUEST` (or the definition's own code) naming what is wrong.
 */
export function workflowRecord(config: CompiledConfig, spec: WorkflowSpec | unknown, options: WorkflowStartOptions = {}): WorkflowRecord {
  const record = startRecord(spec, options);
  checkSteps(config, record);
  return record;
}

/**
 * The record that starts a workflow, its definition checked but not against a configuration (a
 * handler's `ctx.emit` checks each queue against its stage's outputs instead).
 */
export function startRecord(spec: WorkflowSpec | unknown, options: WorkflowStartOptions = {}): WorkflowRecord {
  const definition = checkWorkflow(spec);
  const id = options.id === undefined ? uuidv7() : checkBatchId(options.id, 'workflow id');
  const tenant = options.tenant === undefined ? undefined : checkTenantSlug(options.tenant, 'tenant');
  return {
    kind: 'workflow',
    id: uuidv7(),
    workflow: id,
    ...(tenant === undefined ? {} : { tenant }),
    definition,
    jobs: jobNodes(planOf(id, definition)).map((node) => node.job as string),
    ...(options.parent === undefined ? {} : { parent: options.parent }),
    traceparent: childTraceparent(options.traceparent),
    at: new Date().toISOString(),
  };
}

/** Every job's queue configured (under `strict_queues`) and allowing its type; a tenant where a queue needs one. */
function checkSteps(config: CompiledConfig, record: WorkflowRecord): void {
  for (const node of jobNodes(planOf(record.workflow, record.definition))) {
    const spec = node.spec;
    if (spec === undefined) continue;
    const where = `workflow step "${node.path}" (${spec.type})`;
    let queue: ResolvedQueueConfig;
    try {
      queue = queueFor(config, spec.queue, 'a workflow step');
    } catch (err) {
      if (err instanceof ConfigError) throw new StagecoachError('INVALID_REQUEST', `${where}: ${err.message}`, { cause: err });
      throw err;
    }
    if (!typeAllowed(queue.allowed_job_types, spec.type)) {
      throw new StagecoachError('INVALID_REQUEST', `${where}: queue "${spec.queue}" does not allow job type "${spec.type}"`);
    }
    if (queue.scope === 'tenant' && record.tenant === undefined) {
      throw new StagecoachError('INVALID_REQUEST', `${where}: queue "${spec.queue}" is tenant-scoped and the workflow has no tenant`);
    }
  }
}
