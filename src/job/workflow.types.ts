import type { CallbackName, JobSpec } from './job.types.js';

/**
 * A job step of a workflow (docs/workflows.md): a job spec and the logical queue it goes to. Its
 * id is not the producer's: it is derived from the workflow's id and the step's place in it, so
 * that whichever process publishes it, however often, it is the same job.
 */
export interface WorkflowJobSpec extends Omit<JobSpec, 'unique' | 'scheduled_at'> {
  queue: string;
}

/** The OJS workflow primitives (spec/ojs-workflows.md): sequential, parallel, parallel with callbacks. */
export type WorkflowKind = 'chain' | 'group' | 'batch';

/**
 * A workflow (OJS chain, group or batch), nested freely: a step of a chain and a job of a group
 * may be a workflow themselves. `steps` for a chain, `jobs` for a group or batch; a batch names
 * at least one callback, run once its jobs have ended (docs/workflows.md).
 */
export interface WorkflowSpec {
  type: WorkflowKind;
  /** Shown by `workflow status` and the dashboard. */
  name?: string;
  /** A chain's steps, run one after another. */
  steps?: WorkflowStep[];
  /** A group's or batch's jobs, run at once. */
  jobs?: WorkflowStep[];
  /** A batch's callbacks: `on_complete` always, `on_success` when no job failed, `on_failure` when one did. */
  callbacks?: Partial<Record<CallbackName, WorkflowJobSpec>>;
}

/** One step of a chain or job of a group: a job, or a workflow nested in it. */
export type WorkflowStep = WorkflowJobSpec | WorkflowSpec;

/** Whether a step is a nested workflow (it has `steps` or `jobs`) rather than a job. */
export function isWorkflowSpec(step: WorkflowStep): step is WorkflowSpec {
  return Array.isArray((step as WorkflowSpec).steps) || Array.isArray((step as WorkflowSpec).jobs);
}
