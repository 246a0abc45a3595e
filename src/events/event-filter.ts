import type { OjsEvent } from './ojs-event.js';

/** Which events match (spec/ojs-events.md 6.4; a webhook subscription's, spec/ojs-webhooks.md 5.2). */
export interface EventFilter {
  /** Event types; `job.*` matches by prefix, `*` every type. */
  types?: readonly string[];
  queues?: readonly string[];
  jobTypes?: readonly string[];
  /** Only events of this tenant (a tenant's token, or the admin acting for one). */
  tenant?: string;
}

/** Whether `event` is one `query` asks for. */
export function eventMatches(event: OjsEvent, query: EventFilter): boolean {
  const data = (event.data ?? {}) as Record<string, unknown>;
  if (
    query.types !== undefined &&
    !query.types.some((type) => type === '*' || (type.endsWith('.*') ? event.type.startsWith(type.slice(0, -1)) : event.type === type))
  )
    return false;
  // A job event names its queue in `data.queue`; a queue event is about the queue in `subject`.
  const queue = typeof data.queue === 'string' ? data.queue : event.type.startsWith('queue.') ? event.subject : undefined;
  if (query.queues !== undefined && (queue === undefined || !query.queues.includes(queue))) return false;
  if (query.jobTypes !== undefined && (typeof data.job_type !== 'string' || !query.jobTypes.includes(data.job_type))) return false;
  return query.tenant === undefined || eventTenant(event) === query.tenant;
}

/** The tenant an event is about: a job's in `data.tenant`, a tenant event's `subject`; undefined for none. */
export function eventTenant(event: OjsEvent): string | undefined {
  const data = (event.data ?? {}) as Record<string, unknown>;
  return typeof data.tenant === 'string' ? data.tenant : event.type.startsWith('tenant.') ? event.subject : undefined;
}
