import { ApiError } from '../api-error.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import type { BindingContext } from './binding-context.js';
import type { WorkerState } from './worker-directory.js';

/** `GET /ojs/v1/admin/workers`: the HTTP workers seen in the last 10 minutes, each with the state wanted of it. */
export function listWorkers(ctx: BindingContext): Promise<ApiResponse> {
  return Promise.resolve({ status: 200, body: ctx.workers.list() });
}

/**
 * `POST /ojs/v1/admin/workers/{id}/quiet` (openapi.yaml) and `.../terminate` (the same for the
 * protocol's other state): the worker's next heartbeat answers it, and its fetches get no jobs
 * meanwhile. 404 for a worker not seen; an order never moves a worker back (terminate, then quiet: stays terminate).
 */
export function orderWorker(state: WorkerState): (ctx: BindingContext, request: ApiRequest) => Promise<ApiResponse> {
  return (ctx, request) => {
    const id = request.params.id ?? '';
    const worker = ctx.workers.order(id, state);
    if (worker === undefined) throw new ApiError(404, 'NOT_FOUND', `no worker "${id}" was seen by this server in the last 10 minutes`);
    return Promise.resolve({ status: 200, body: { worker } });
  };
}
