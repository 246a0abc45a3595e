import type { BatchFold, FoldResult } from '../batch/batch-fold.js';
import type { WorkflowKind } from '../job/workflow.types.js';
import type { TrackingRecord, WorkflowRecord } from '../tracking/tracking-report.js';
import { evaluate, type Evaluation } from './workflow-eval.js';
import { planOf, type PlanNode } from './workflow-plan.js';

/** What the fold keeps of a workflow: its definition as a plan, and where it came from. */
export interface TrackedWorkflow {
  id: string;
  type: WorkflowKind;
  name?: string;
  tenant?: string;
  plan: PlanNode;
  /** The job whose handler started it, and the trace its steps continue. */
  parent?: string;
  traceparent?: string;
  created_at: string;
}

/**
 * Workflows as the tracking stream defines them (docs/workflows.md), beside the batch fold that
 * tracks their jobs (a workflow is a batch): `observe` takes every record after the batch fold
 * did, and says which workflow it may have moved. The first definition of an id stands; one the
 * batch fold refused (another tenant's batch id) is not taken. States are not kept but derived
 * (`evaluate`), so a replay, a duplicate or a second reader derive the same.
 */
export class WorkflowFold {
  readonly workflows = new Map<string, TrackedWorkflow>();

  constructor(readonly batches: BatchFold) {}

  /** @returns the id of the workflow the record concerns, when it is one of ours. */
  observe(record: TrackingRecord, result: FoldResult): string | undefined {
    if (record.kind === 'workflow') {
      if (result.refused !== undefined || this.workflows.has(record.workflow)) return undefined;
      this.workflows.set(record.workflow, trackedOf(record));
      return record.workflow;
    }
    const id = result.batch?.id;
    return id !== undefined && this.workflows.has(id) ? id : undefined;
  }

  /** The workflow's states and due jobs now; `published`: job ids sent and not read back yet. */
  evaluate(id: string, published?: ReadonlySet<string>): Evaluation | undefined {
    const workflow = this.workflows.get(id);
    if (workflow === undefined) return undefined;
    return evaluate(workflow.plan, this.batches.batches.get(id), this.batches, published);
  }
}

function trackedOf(record: WorkflowRecord): TrackedWorkflow {
  const { definition } = record;
  return {
    id: record.workflow,
    type: definition.type,
    ...(definition.name === undefined ? {} : { name: definition.name }),
    ...(record.tenant === undefined ? {} : { tenant: record.tenant }),
    plan: planOf(record.workflow, definition),
    ...(record.parent === undefined ? {} : { parent: record.parent }),
    ...(record.traceparent === undefined ? {} : { traceparent: record.traceparent }),
    created_at: record.at,
  };
}
