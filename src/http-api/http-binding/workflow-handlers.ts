import { cancelBatch } from '../../directives/batch-directives.js';
import type { WorkflowSpec } from '../../job/workflow.types.js';
import type { Evaluation } from '../../workflow/workflow-eval.js';
import { workflowKey, type TrackedWorkflow } from '../../workflow/workflow-fold.js';
import { jobNodes, planOf } from '../../workflow/workflow-plan.js';
import { workflowEnded, workflowView } from '../../workflow/workflow-views.js';
import { workflowRecord } from '../../workflow/workflow-start.js';
import { ApiError } from '../api-error.js';
import { readJsonValue } from '../request-body.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import type { BindingContext } from './binding-context.js';
import { MAX_PUSH_BYTES } from './push-handlers.js';
import { confinedTo, tenantFilterOf, tenantOf } from './request-tenant.js';
import { readWorkflowInput } from './workflow-input.js';
import { clientWorkflowId, tenantWorkflowId } from '../../job/tenant-ids.js';

/** How long `POST /ojs/v1/workflows` waits for the workflow's first steps to be published before answering it `pending`. */
export const START_WAIT_MS = 10_000;
/** Most workflows `GET /ojs/v1/workflows` lists unless `limit` says otherwise. */
const LIST_LIMIT = 1000;

/**
 * `POST /ojs/v1/workflows` (docs/workflows.md; shapes: workflow-input.ts): 201 `{ workflow }`.
 * The workflow's queues are declared for HTTP workers (as a push declares its job's), its record
 * appended, then the answer waits (up to START_WAIT_MS) until the workflow lock's holder has
 * published its first steps, so that a worker fetching right after finds them; past the wait it
 * is answered `pending` (no tracker or admin server holds the lock).
 */
export async function createWorkflow(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const body = await readJsonValue(request.req, MAX_PUSH_BYTES, 'INVALID_REQUEST');
  const tenant = tenantOf(request);
  const { spec, id } = readWorkflowInput(body, tenant);
  const config = await ctx.admin.configFile.load();
  // Checked before anything is declared (the publisher checks it again).
  const checked = workflowRecord(config, spec, tenant === undefined ? {} : { tenant }).definition;
  const publisher = await ctx.publisher();
  for (const queue of queuesOf(checked)) {
    // As a push declares its job's queue (an unconfigured one counted against a tenant token's bound).
    await ctx.remote.declare(queue, tenant, confinedTo(request));
  }
  // A tenant's own id names its own workflow (as its job ids do, tenant-job-ids.ts): the same id
  // from another tenant is another workflow, and neither learns of the other's.
  const confined = confinedTo(request);
  const kept = id === undefined || confined === undefined ? id : tenantWorkflowId(confined, id);
  const started = await publisher.workflow(checked, {
    ...(tenant === undefined ? {} : { tenant }),
    ...(kept === undefined ? {} : { id: kept }),
  });
  const deadline = Date.now() + START_WAIT_MS;
  for (;;) {
    const found = await find(ctx, started, tenant);
    if (found !== undefined && (found.evaluation.state !== 'pending' || Date.now() >= deadline)) {
      return { status: 201, body: { workflow: await view(ctx, found, request) } };
    }
    if (Date.now() >= deadline)
      throw new ApiError(
        503,
        'CONNECTION_FAILED',
        `workflow "${started}" was started but is not read back yet: ask GET /ojs/v1/workflows/${started}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** `GET /ojs/v1/workflows/{id}`: `{ workflow }` with every step's state; 404 for one unknown, or another tenant's. */
export async function getWorkflow(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const found = await visible(ctx, request);
  return { status: 200, body: { workflow: await view(ctx, found, request) } };
}

/** `GET /ojs/v1/workflows?state=&tenant=&limit=`: `{ workflows, total }`, oldest first (`limit` keeps the latest). */
export async function listWorkflows(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const advancer = await ctx.admin.workflows();
  const tenant = tenantFilterOf(request, request.query.get('tenant') ?? undefined);
  const state = request.query.get('state') ?? undefined;
  const limit = Number(request.query.get('limit') ?? LIST_LIMIT);
  if (!Number.isInteger(limit) || limit < 1) throw new ApiError(400, 'INVALID_REQUEST', '"limit" must be a positive integer');
  const all: Array<Record<string, unknown>> = [];
  for (const workflow of advancer.workflows.workflows.values()) {
    if (tenant !== undefined && workflow.tenant !== tenant) continue;
    const evaluation = advancer.workflows.evaluate(workflowKey(workflow)) as Evaluation;
    if (state !== undefined && evaluation.state !== state) continue;
    all.push(await view(ctx, { workflow, evaluation }, request));
  }
  return { status: 200, body: { workflows: all.slice(-limit), total: all.length } };
}

/**
 * `DELETE /ojs/v1/workflows/{id}`: cancels what has not started (docs/workflows.md, Cancel): the
 * workflow's batch is cancelled (stages discard its jobs unrun), steps not yet published never
 * will be, and its jobs held here for HTTP workers and not claimed are cancelled now; jobs
 * running finish. 200 `{ workflow }` (state `cancelled`); 409 for a workflow that has ended.
 */
export async function cancelWorkflow(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const found = await visible(ctx, request);
  const { workflow, evaluation } = found;
  if (workflowEnded(evaluation.state)) {
    throw new ApiError(409, 'CONFLICT', `workflow "${workflow.id}" is already in terminal state "${evaluation.state}"`);
  }
  await ctx.admin.serializer.run(async () => {
    const config = await ctx.admin.configFile.load();
    await cancelBatch(config, workflow.id, ctx.admin.log, workflow.tenant);
  });
  ctx.remote.forget(workflow.id);
  for (const node of jobNodes(workflow.plan)) {
    const id = node.job as string;
    if (ctx.board.claimOf(id) === undefined) ctx.board.cancel(id);
  }
  const after = (await find(ctx, workflow.id, workflow.tenant)) ?? found;
  return { status: 200, body: { workflow: { ...(await view(ctx, after, request)), cancelled_at: new Date().toISOString() } } };
}

interface Found {
  workflow: TrackedWorkflow;
  evaluation: Evaluation;
}

/** The workflow `id` of `tenant` (without one, the admin's view: see WorkflowFold.workflow). */
async function find(ctx: BindingContext, id: string, tenant: string | undefined): Promise<Found | undefined> {
  const advancer = await ctx.admin.workflows();
  const workflow = advancer.workflows.workflow(id, tenant);
  const evaluation = workflow === undefined ? undefined : advancer.workflows.evaluate(workflowKey(workflow));
  return workflow === undefined || evaluation === undefined ? undefined : { workflow, evaluation };
}

/**
 * The workflow of the path (the request's tenant's own of that id first, then the id as kept), or
 * a 404 (unknown, or another tenant's: a tenant learns nothing of another's).
 */
async function visible(ctx: BindingContext, request: ApiRequest): Promise<Found> {
  const id = request.params.id ?? '';
  const tenant = tenantOf(request);
  const found = (tenant === undefined ? undefined : await find(ctx, tenantWorkflowId(tenant, id), tenant)) ?? (await find(ctx, id, tenant));
  const confined = confinedTo(request);
  if (found === undefined || (confined !== undefined && found.workflow.tenant !== confined)) {
    throw new ApiError(404, 'NOT_FOUND', `workflow ${id} not found`);
  }
  return found;
}

/**
 * The view, a `pending` step whose job a worker claimed or the store shows started shown `active`;
 * to a tenant (its token, or the admin acting for it), under the id the tenant gave it.
 */
async function view(ctx: BindingContext, { workflow, evaluation }: Found, request: ApiRequest): Promise<Record<string, unknown>> {
  const store = await ctx.admin.jobs();
  const started = new Set<string>();
  for (const node of jobNodes(workflow.plan)) {
    const id = node.job as string;
    if (ctx.board.claimOf(id) !== undefined || (await store.get(id))?.state === 'active') started.add(id);
  }
  const shown = workflowView(workflow, evaluation, (id) => started.has(id));
  const tenant = tenantOf(request);
  return tenant === undefined || workflow.tenant !== tenant ? shown : { ...shown, id: clientWorkflowId(tenant, workflow.id) };
}

function queuesOf(spec: WorkflowSpec): Set<string> {
  return new Set(jobNodes(planOf('-', spec)).map((node) => node.spec?.queue as string));
}
