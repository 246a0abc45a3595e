import type { Evaluation, NodeEval, StepState } from './workflow-eval.js';
import type { TrackedWorkflow } from './workflow-fold.js';

/** Where a step's job stands in the job store, when it is asked (a `pending` step whose job started shows `active`). */
export type StartedLookup = (jobId: string) => boolean;

/**
 * A workflow as `workflow status --json`, `GET /ojs/v1/workflows/{id}` and the dashboard show it
 * (docs/workflows.md): its state and counts as openapi.yaml's Workflow names them (`steps_total`,
 * `steps_completed` for a chain; `jobs_total`, `jobs_completed` for a group or batch), and every
 * step with its own state (spec/ojs-workflows.md 11.2), nested as the workflow is.
 */
export function workflowView(
  workflow: TrackedWorkflow,
  evaluation: Evaluation,
  started: StartedLookup = () => false,
): Record<string, unknown> {
  const root = evaluation.root;
  const children = root.children;
  const completed = children.filter((child) => child.state === 'completed').length;
  const failed = children.filter((child) => child.state === 'failed').length;
  const jobs = collectJobs(root);
  const view: Record<string, unknown> = {
    id: workflow.id,
    type: workflow.type,
    ...(workflow.name === undefined ? {} : { name: workflow.name }),
    tenant: workflow.tenant ?? null,
    state: evaluation.state,
    ...(workflow.type === 'chain'
      ? { steps_total: children.length, steps_completed: completed, steps_failed: failed }
      : { jobs_total: children.length, jobs_completed: completed, jobs_failed: failed }),
    created_at: workflow.created_at,
    ...(workflow.parent === undefined ? {} : { parent_id: workflow.parent }),
    // Every job of the workflow's batch: its steps and what they emitted downstream.
    counts: root.counts,
    metadata: {
      created_at: workflow.created_at,
      job_count: jobs.length,
      completed_count: jobs.filter((node) => node.state === 'completed').length,
      failed_count: jobs.filter((node) => node.state === 'failed').length,
    },
  };
  const failures = jobs.filter((node) => node.state === 'failed');
  if (failures.length > 0) {
    // spec/ojs-workflows.md 9.6.
    if (workflow.type === 'chain') view.failed_step_index = children.findIndex((child) => child.state === 'failed');
    view.failed_job_ids = failures.map((node) => node.node.job);
    view.errors = failures.map((node) => ({
      job_id: node.node.job,
      code: node.error?.type ?? 'FAILED',
      message: node.error?.message ?? '',
      attempt: node.job?.final?.attempt ?? 1,
    }));
  }
  Object.assign(view, nested(root, started));
  return view;
}

/** One step: a job (`type` its job type) or a nested workflow (`type` chain, group or batch). */
function stepView(evaluation: NodeEval, started: StartedLookup): Record<string, unknown> {
  const { node } = evaluation;
  const state: StepState = evaluation.state === 'pending' && node.job !== undefined && started(node.job) ? 'active' : evaluation.state;
  const view: Record<string, unknown> = {
    index: node.index,
    path: node.path,
    type: node.spec?.type ?? node.kind,
    ...(node.name === undefined ? {} : { name: node.name }),
    state,
  };
  if (node.job !== undefined) {
    view.job_id = state === 'waiting' ? null : node.job;
    view.queue = node.spec?.queue;
    if (evaluation.state === 'completed') view.result = evaluation.result;
    if (evaluation.error !== undefined) view.error = evaluation.error;
    // The step's job and the jobs it emitted downstream.
    if (evaluation.counts.known > 1) view.counts = evaluation.counts;
    return view;
  }
  return { ...view, counts: evaluation.counts, ...nested(evaluation, started) };
}

function nested(evaluation: NodeEval, started: StartedLookup): Record<string, unknown> {
  const { node } = evaluation;
  const children = evaluation.children.map((child) => stepView(child, started));
  const out: Record<string, unknown> = node.kind === 'chain' ? { steps: children } : { jobs: children };
  if (evaluation.callbacks.length > 0) {
    out.callbacks = Object.fromEntries(evaluation.callbacks.map((callback) => [callback.node.callback, stepView(callback, started)]));
  }
  return out;
}

function collectJobs(evaluation: NodeEval): NodeEval[] {
  const out: NodeEval[] = [];
  const visit = (node: NodeEval): void => {
    if (node.node.job !== undefined) out.push(node);
    for (const child of node.children) visit(child);
    for (const callback of node.callbacks) visit(callback);
  };
  visit(evaluation);
  return out;
}

/** Whether a workflow state is final: nothing of it will run any more (spec/ojs-workflows.md 8.1). */
export function workflowEnded(state: string): boolean {
  return state === 'completed' || state === 'failed' || state === 'cancelled';
}
