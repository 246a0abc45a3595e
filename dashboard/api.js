// The admin API as the page calls it. Reads need no token; every change sends the admin token
// (kept in sessionStorage: gone when the tab closes) as `Authorization: Bearer`, and the server
// decides. A change without a token is still sent, so the operator reads the server's own reason.

const TOKEN_KEY = 'stagecoach.admin-token';

export const adminToken = {
  get: () => sessionStorage.getItem(TOKEN_KEY) ?? '',
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** A refused or failed request, with the OJS error object's code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function request(method, path, { query = {}, auth = false, json, tenant } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, String(value));
  }
  const headers = { Accept: 'application/json', ...(tenant ? { 'X-OJS-Tenant': tenant } : {}) };
  const token = auth ? adminToken.get() : '';
  if (token !== '') headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    if (json !== undefined) headers['Content-Type'] = 'application/json';
    response = await fetch(url, { method, headers, cache: 'no-store', ...(json === undefined ? {} : { body: JSON.stringify(json) }) });
  } catch (err) {
    throw new ApiError(0, 'UNREACHABLE', `the admin server does not answer (${err.message})`);
  }
  const text = await response.text();
  const body = parseJson(text);
  if (!response.ok) {
    const error = body?.error;
    throw new ApiError(response.status, error?.code ?? `HTTP_${response.status}`, error?.message ?? (text || response.statusText));
  }
  return body;
}

/** The answer's JSON, or null for an empty or non-JSON answer (the status line speaks instead). */
function parseJson(text) {
  try {
    return text === '' ? null : JSON.parse(text);
  } catch {
    return null;
  }
}

const queuePath = (queue) => `/ojs/v1/queues/${encodeURIComponent(queue)}`;
const batchPath = (id) => `/ojs/v1/batches/${encodeURIComponent(id)}`;

export const api = {
  matrix: (query) => request('GET', '/ojs/v1/dashboard/matrix', { query }),
  deadLetters: (queue, tenant) => request('GET', `${queuePath(queue)}/dead-letters`, { query: { tenant, limit: 100 } }),
  deadLetter: (queue, tenant, ref) => request('GET', `${queuePath(queue)}/dead-letters/${encodeURIComponent(ref)}`, { query: { tenant } }),
  retryDeadLetters: (queue, tenant) => request('POST', `${queuePath(queue)}/dead-letters/retry`, { query: { tenant }, auth: true }),
  purgeDeadLetters: (queue, tenant) => request('DELETE', `${queuePath(queue)}/dead-letters`, { query: { tenant }, auth: true }),
  unroutable: (query = {}) => request('GET', '/ojs/v1/unroutable', { query: { limit: 100, ...query } }),
  unroutableMessage: (ref) => request('GET', `/ojs/v1/unroutable/${encodeURIComponent(ref)}`),
  replayUnroutable: () => request('POST', '/ojs/v1/unroutable/replay', { auth: true }),
  /** `pause`, `resume` or `drain` a queue of a tenant (or a shared queue), through the admin API. */
  setState: (queue, tenant, action) => request('POST', `${queuePath(queue)}/${action}`, { query: { tenant }, auth: true }),
  /** Batch status, as `stagecoach batch status|list --json` and `job status --json` print it. */
  batches: (query = {}) => request('GET', '/ojs/v1/batches', { query }),
  batch: (id) => request('GET', batchPath(id)),
  batchJobs: (id, query = {}) => request('GET', `${batchPath(id)}/jobs`, { query }),
  job: (id) => request('GET', `/ojs/v1/jobs/${encodeURIComponent(id)}`),
  /** `job list`: `{ jobs, next_cursor }`, by tenant, queue, state, type, a page at a time. */
  jobs: (query = {}) => request('GET', '/ojs/v1/jobs', { query }),
  /** `batch cancel|pause|resume`: `{ action, batch, moved, kept }`. */
  cancelBatch: (id) => request('POST', `${batchPath(id)}/cancel`, { auth: true }),
  pauseBatch: (id) => request('POST', `${batchPath(id)}/pause`, { auth: true }),
  resumeBatch: (id) => request('POST', `${batchPath(id)}/resume`, { auth: true }),
  /** Schedules (`cron list`): `{ crons, count }`, each with its next and last run, run count and latest occurrences. */
  crons: () => request('GET', '/ojs/v1/cron'),
  triggerCron: (name, tenant) => request('POST', `${cronPath(name)}/trigger`, { auth: true, tenant }),
  toggleCron: (name, tenant, enabled) => request('PATCH', cronPath(name), { auth: true, json: { enabled }, tenant }),
};

/** A tenant's schedule is addressed with its tenant header (the admin acting for it). */
const cronPath = (name) => `/ojs/v1/cron/${encodeURIComponent(name)}`;
