import { StagecoachError } from '../errors/errors.js';
import { checkTenantSlug } from '../util/tenant-slug.js';
import { JOB_STATES, type JobState } from './job-lifecycle.js';
import type { JobFilter } from './job-store.js';

/** Most jobs `job list` and `GET /ojs/v1/jobs` give per page, and their default. */
export const MAX_JOB_PAGE = 1000;
export const DEFAULT_JOB_PAGE = 100;

/** The filter of `job list` and `GET /ojs/v1/jobs`, checked. */
export function jobFilter(opts: {
  tenant?: string;
  queue?: string;
  state?: string;
  type?: string;
  tag?: string;
  since?: string;
}): JobFilter {
  if (opts.state !== undefined && !(JOB_STATES as readonly string[]).includes(opts.state)) {
    throw new StagecoachError('INVALID_REQUEST', `state: one of ${JOB_STATES.join(', ')}, got "${opts.state}"`);
  }
  let since: string | undefined;
  if (opts.since !== undefined) {
    const at = Date.parse(opts.since);
    if (Number.isNaN(at)) throw new StagecoachError('INVALID_REQUEST', `since: an ISO 8601 time, got "${opts.since}"`);
    since = new Date(at).toISOString();
  }
  return {
    ...(opts.tenant === undefined ? {} : { tenant: checkTenantSlug(opts.tenant, 'tenant') }),
    ...(opts.queue === undefined ? {} : { queue: opts.queue }),
    ...(opts.state === undefined ? {} : { state: opts.state as JobState }),
    ...(opts.type === undefined ? {} : { type: opts.type }),
    ...(opts.tag === undefined ? {} : { tag: opts.tag }),
    ...(since === undefined ? {} : { since }),
  };
}

/** A page size, 1..MAX_JOB_PAGE. */
export function pageLimit(value: string | undefined): number {
  if (value === undefined) return DEFAULT_JOB_PAGE;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_JOB_PAGE) {
    throw new StagecoachError('INVALID_REQUEST', `limit: an integer from 1 to ${MAX_JOB_PAGE}, got "${value}"`);
  }
  return limit;
}
