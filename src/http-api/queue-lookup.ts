import type { CompiledConfig } from '../config/config.types.js';
import { inspectQueues } from '../inspect/inspect-queues.js';
import type { QueueReport } from '../inspect/queue-report.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';

/**
 * The physical queues of a logical queue (of one tenant), read from the broker. A queue is known
 * when it is configured, used by a configured stage, or on the broker: anything else is a 404,
 * so that no state marker or setting is ever made for a name nobody uses.
 */
export async function reportsOf(
  ctx: AdminContext,
  config: CompiledConfig,
  name: string,
  tenant: string | undefined,
): Promise<QueueReport[]> {
  const reports = await inspectQueues(config, { api: ctx.api(config), queue: name, ...(tenant === undefined ? {} : { tenant }) });
  if (reports.length > 0) return reports;
  if (!isKnown(ctx, config, name)) {
    throw new ApiError(404, 'NOT_FOUND', `no queue "${name}": not configured, used by no stage, not on the broker`);
  }
  if (tenant !== undefined && !config.tenants.includes(tenant)) {
    throw new ApiError(404, 'NOT_FOUND', `tenant "${tenant}" has no queue "${name}": it is neither configured nor provisioned`);
  }
  return reports;
}

/** Configured, or read or written by a configured stage. */
export function isKnown(ctx: AdminContext, config: CompiledConfig, name: string): boolean {
  return config.queues.has(name) || ctx.stages.some((stage) => stage.input === name || stage.outputs.includes(name));
}

/** The tenants among some physical queues, sorted. */
export function tenantsOf(reports: readonly QueueReport[]): string[] {
  return [...new Set(reports.map((r) => r.tenant).filter((t): t is string => t !== undefined))].sort();
}
