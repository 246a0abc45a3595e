import { cancelBatch } from '../../directives/batch-directives.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { checkBatchId } from '../../util/batch-id.js';
import { readWorkflows, type WorkflowsRead } from '../../workflow/read-workflows.js';
import type { Evaluation } from '../../workflow/workflow-eval.js';
import { workflowKey, type TrackedWorkflow } from '../../workflow/workflow-fold.js';
import { jobNodes } from '../../workflow/workflow-plan.js';
import { workflowEnded, workflowView } from '../../workflow/workflow-views.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/** `stagecoach workflow status <id> [--json]`: the workflow and every step's state, read from the stream. */
export async function workflowStatus(id: string, opts: { json?: boolean; config?: string }): Promise<number> {
  checkBatchId(id, 'workflow');
  const { view } = await read(id, opts.config);
  if (opts.json) process.stdout.write(`${JSON.stringify(view)}\n`);
  else process.stdout.write(formatWorkflow(view));
  return EXIT_OK;
}

/** `stagecoach workflow list [--tenant T] [--state S] [--json]`. */
export async function workflowList(opts: { tenant?: string; state?: string; json?: boolean; config?: string }): Promise<number> {
  const tenant = opts.tenant === undefined ? undefined : resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const read = await readWorkflows(config, createLogger({ service: 'stagecoach', command: 'workflow' }));
  const views: Array<Record<string, unknown>> = [];
  for (const workflow of read.workflows.workflows.values()) {
    if (tenant !== undefined && workflow.tenant !== tenant) continue;
    const view = viewOf(read, workflow);
    if (opts.state !== undefined && view.state !== opts.state) continue;
    views.push(view);
  }
  if (opts.json) process.stdout.write(`${JSON.stringify(views)}\n`);
  else {
    for (const view of views)
      process.stdout.write(
        `${String(view.id)}\t${String(view.tenant ?? '-')}\t${String(view.type)}\t${String(view.state)}\t${String(view.name ?? '')}\n`,
      );
    process.stdout.write(`${views.length} workflow${views.length === 1 ? '' : 's'}\n`);
  }
  return EXIT_OK;
}

/**
 * `stagecoach workflow cancel <id> [--json]`: what has not started never will (its batch is
 * cancelled: stages discard its jobs unrun; steps not published yet are not). Exit 1 for a
 * workflow that has ended (CONFLICT) or that no record names (NOT_FOUND).
 */
export async function workflowCancel(id: string, opts: { json?: boolean; config?: string }): Promise<number> {
  checkBatchId(id, 'workflow');
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command: 'workflow' });
  const { view } = await read(id, opts.config);
  if (workflowEnded(String(view.state))) {
    throw new StagecoachError('CONFLICT', `workflow "${id}" is already in terminal state "${String(view.state)}"`);
  }
  await cancelBatch(config, id, log, view.tenant === undefined || view.tenant === null ? undefined : String(view.tenant));
  const after = await read(id, opts.config);
  if (opts.json) process.stdout.write(`${JSON.stringify(after.view)}\n`);
  else process.stdout.write(`workflow ${id}: cancel recorded; steps not started will not run (state ${String(after.view.state)})\n`);
  return EXIT_OK;
}

async function read(id: string, configFile: string | undefined): Promise<{ view: Record<string, unknown> }> {
  const config = await loadConfig(configFile);
  const read = await readWorkflows(config, createLogger({ service: 'stagecoach', command: 'workflow' }));
  // The operator's view: the workflow of that id of no tenant, else the first one of that id.
  const workflow = read.workflows.workflow(id);
  if (workflow === undefined) {
    throw new StagecoachError('NOT_FOUND', `no record names workflow "${id}" (the stream keeps tracking.max_age)`);
  }
  return { view: viewOf(read, workflow) };
}

function viewOf(read: WorkflowsRead, workflow: TrackedWorkflow): Record<string, unknown> {
  const evaluation = read.workflows.evaluate(workflowKey(workflow)) as Evaluation;
  const started = new Set(
    jobNodes(workflow.plan)
      .map((node) => node.job as string)
      .filter((job) => read.jobs.row(job)?.state === 'active'),
  );
  return workflowView(workflow, evaluation, (job) => started.has(job));
}

/** `workflow status` for people: a line for the workflow, then one per step, indented as they nest. */
export function formatWorkflow(view: Record<string, unknown>): string {
  const lines = [
    `workflow ${String(view.id)} (${String(view.type)}${view.name === undefined ? '' : ` "${String(view.name)}"`}, tenant ${String(view.tenant ?? '-')}): ${String(view.state)}`,
  ];
  const walk = (steps: unknown, depth: number): void => {
    if (!Array.isArray(steps)) return;
    for (const step of steps as Array<Record<string, unknown>>) {
      const counts = step.counts as { known?: number; in_flight?: number } | undefined;
      const extra = counts?.known !== undefined && counts.known > 1 ? `, ${counts.known} jobs, ${counts.in_flight ?? 0} in flight` : '';
      const error = step.error === undefined ? '' : ` (${(step.error as { message?: string }).message ?? ''})`;
      lines.push(`${'  '.repeat(depth)}${String(step.path)}  ${String(step.type)}  ${String(step.state)}${extra}${error}`);
      walk(step.steps ?? step.jobs, depth + 1);
      const callbacks = step.callbacks as Record<string, unknown> | undefined;
      if (callbacks !== undefined) walk(Object.values(callbacks), depth + 1);
    }
  };
  walk(view.steps ?? view.jobs, 1);
  const callbacks = view.callbacks as Record<string, unknown> | undefined;
  if (callbacks !== undefined) walk(Object.values(callbacks), 1);
  return `${lines.join('\n')}\n`;
}
