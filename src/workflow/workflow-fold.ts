import type { BatchFold, FoldResult } from '../batch/batch-fold.js';
import { batchKey } from '../batch/batch-key.js';
import type { WorkflowKind } from '../job/workflow.types.js';
import type { TrackingRecord, WorkflowRecord } from '../tracking-stream/tracking-report.js';
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

/** Where a workflow is kept: as its batch is (batch-key.ts), its tenant's and its id's. */
export function workflowKey(workflow: Pick<TrackedWorkflow, 'id' | 'tenant'>): string {
  return batchKey(workflow.tenant, workflow.id);
}

/**
 * Workflows as the tracking stream defines them (docs/workflows.md), beside the batch fold that
 * tracks their jobs (a workflow is a batch): `observe` takes every record after the batch fold
 * did, and says which workflow it may have moved. A workflow is its tenant's and its id's, as its
 * batch is: the same id from two tenants is two workflows; of one tenant's, the first definition
 * stands. States are not kept but derived (`evaluate`), so a replay, a duplicate or a second
 * reader derive the same.
 */
export class WorkflowFold {
  /** By workflowKey (tenant and id). */
  readonly workflows = new Map<string, TrackedWorkflow>();

  constructor(readonly batches: BatchFold) {}

  /** @returns the key (workflowKey) of the workflow the record concerns, when it is one of ours. */
  observe(record: TrackingRecord, result: FoldResult): string | undefined {
    if (record.kind === 'workflow') {
      const key = batchKey(record.tenant, record.workflow);
      if (this.workflows.has(key)) return undefined;
      this.workflows.set(key, trackedOf(record));
      return key;
    }
    const key = result.batch?.key;
    return key !== undefined && this.workflows.has(key) ? key : undefined;
  }

  /**
   * The workflow `id` of `tenant`; without a tenant (the operator's view), the one of no tenant,
   * else the first of that id.
   */
  workflow(id: string, tenant?: string): TrackedWorkflow | undefined {
    const own = this.workflows.get(batchKey(tenant, id));
    if (own !== undefined || tenant !== undefined) return own;
    for (const workflow of this.workflows.values()) if (workflow.id === id) return workflow;
    return undefined;
  }

  /**
   * The workflow's states and due jobs now; `published`: job ids sent and not read back yet. By
   * its workflowKey, or by its id as {@link workflow} finds it without a tenant (a key holds `/`,
   * an id never does).
   */
  evaluate(key: string, published?: ReadonlySet<string>): Evaluation | undefined {
    const workflow = this.workflows.get(key) ?? this.workflow(key);
    if (workflow === undefined) return undefined;
    return evaluate(workflow.plan, this.batches.batches.get(workflowKey(workflow)), this.batches, published);
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
