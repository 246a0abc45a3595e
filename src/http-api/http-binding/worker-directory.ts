/** A worker's lifecycle state as the server wants it (spec/ojs-worker-protocol.md 2): never back from `terminate`. */
export type WorkerState = 'running' | 'quiet' | 'terminate';

/** A worker as this server has seen it (`GET /ojs/v1/admin/workers`). */
export interface WorkerSeen {
  id: string;
  /** What the server wants of it: its next heartbeat answers this. */
  state: WorkerState;
  /** The tenant of its requests, when a tenant token confines it. */
  tenant?: string;
  first_seen: string;
  last_seen: string;
  /** Jobs it said it holds at its last heartbeat. */
  active_jobs: number;
}

/** A worker unseen this long is forgotten (its claims went back long before: the visibility timeout). */
export const WORKER_FORGOTTEN_MS = 10 * 60_000;
const ORDER: Record<WorkerState, number> = { running: 0, quiet: 1, terminate: 2 };

/**
 * The HTTP workers this server has seen (fetches and heartbeats), and the state an operator wants
 * of each: `quiet` (stop fetching, finish what it holds) or `terminate` (shut down gracefully).
 * The worker learns it from its next heartbeat's answer; meanwhile its fetches get no jobs. An
 * order only moves forward (running, quiet, terminate), as the worker protocol's lifecycle does.
 * In memory: a server restart forgets the orders, and the workers go on running.
 */
export class WorkerDirectory {
  private readonly workers = new Map<string, WorkerSeen>();
  /** `--test-reset` only: jobs whose claimer is ordered a state (see orderClaimerOf). */
  private readonly claimerOrders = new Map<string, WorkerState>();
  private sweptAt = 0;

  /** Notes a request of `worker`; `activeJobs` from its heartbeat. @returns the state wanted of it. */
  seen(worker: string, tenant: string | undefined, activeJobs?: number): WorkerState {
    const now = new Date();
    // A sweep a minute, not one per request.
    if (now.getTime() - this.sweptAt > 60_000) {
      this.sweptAt = now.getTime();
      this.forgetOlderThan(now.getTime() - WORKER_FORGOTTEN_MS);
    }
    let seen = this.workers.get(worker);
    if (seen === undefined) {
      seen = { id: worker, state: 'running', first_seen: now.toISOString(), last_seen: now.toISOString(), active_jobs: 0 };
      this.workers.set(worker, seen);
    }
    seen.last_seen = now.toISOString();
    if (tenant !== undefined) seen.tenant = tenant;
    if (activeJobs !== undefined) seen.active_jobs = activeJobs;
    return seen.state;
  }

  /** An operator's order; undefined when no such worker was seen (or it was forgotten). */
  order(worker: string, state: WorkerState): WorkerSeen | undefined {
    const seen = this.workers.get(worker);
    if (seen !== undefined && ORDER[state] > ORDER[seen.state]) seen.state = state;
    return seen;
  }

  list(tenant?: string): WorkerSeen[] {
    this.forgetOlderThan(Date.now() - WORKER_FORGOTTEN_MS);
    return [...this.workers.values()].filter((seen) => tenant === undefined || seen.tenant === tenant).map((seen) => ({ ...seen }));
  }

  /**
   * `--test-reset` only: the worker that claims job `id` is ordered `state`. The public
   * conformance suite has no operator call; it asks for a directive through the job it pushes
   * (`options.metadata.test_directive`), and a test server plays the operator (docs/http-binding.md).
   */
  orderClaimerOf(id: string, state: WorkerState): void {
    this.claimerOrders.set(id, state);
  }

  /** `worker` claimed jobs `ids`: the orders waiting for their claimers are given. */
  claimed(worker: string, ids: readonly string[]): void {
    for (const id of ids) {
      const state = this.claimerOrders.get(id);
      if (state === undefined) continue;
      this.claimerOrders.delete(id);
      this.order(worker, state);
    }
  }

  clear(): void {
    this.workers.clear();
    this.claimerOrders.clear();
  }

  private forgetOlderThan(ms: number): void {
    const before = new Date(ms).toISOString();
    for (const [id, seen] of this.workers) if (seen.last_seen < before) this.workers.delete(id);
  }
}

/** The state a test push asks of its claimer (`options.metadata.test_directive`), if any. */
export function testDirectiveOf(pushed: unknown): WorkerState | undefined {
  const directive = (pushed as { options?: { metadata?: { test_directive?: unknown } } } | null)?.options?.metadata?.test_directive;
  return directive === 'quiet' || directive === 'terminate' ? directive : undefined;
}
