// The admin API as the page calls it. The page keeps two tokens in sessionStorage (gone when the
// tab closes), sent as `Authorization: Bearer`: the one it signed in with (the admin's, or a
// viewer's from `stagecoach credentials <name> --role viewer`), sent with reads, and the admin
// token a confirmation asked for, sent with changes. The server decides: once it has an admin
// token, reads need a token and changes the admin's. A request without one is still sent, so the
// operator reads the server's own reason.

const TOKEN_KEY = 'stagecoach.admin-token';
const READ_TOKEN_KEY = 'stagecoach.read-token';

const kept = (key) => ({
  get: () => sessionStorage.getItem(key) ?? '',
  set: (value) => sessionStorage.setItem(key, value),
  clear: () => sessionStorage.removeItem(key),
});

/** The admin token, for changes (asked for by the confirmation of the first change). */
export const adminToken = kept(TOKEN_KEY);
/** The token the page signed in with, for reads. */
export const readToken = kept(READ_TOKEN_KEY);

/** A refused or failed request, with the OJS error object's code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function request(method, path, { query = {}, json, tenant } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, String(value));
  }
  const headers = { Accept: 'application/json', ...(tenant ? { 'X-OJS-Tenant': tenant } : {}) };
  const token = method === 'GET' ? readToken.get() || adminToken.get() : adminToken.get() || readToken.get();
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
  retryDeadLetters: (queue, tenant) => request('POST', `${queuePath(queue)}/dead-letters/retry`, { query: { tenant } }),
  purgeDeadLetters: (queue, tenant) => request('DELETE', `${queuePath(queue)}/dead-letters`, { query: { tenant } }),
  unroutable: (query = {}) => request('GET', '/ojs/v1/unroutable', { query: { limit: 100, ...query } }),
  unroutableMessage: (ref) => request('GET', `/ojs/v1/unroutable/${encodeURIComponent(ref)}`),
  replayUnroutable: () => request('POST', '/ojs/v1/unroutable/replay'),
  /** `pause`, `resume` or `drain` a queue of a tenant (or a shared queue), through the admin API. */
  setState: (queue, tenant, action) => request('POST', `${queuePath(queue)}/${action}`, { query: { tenant } }),
  /** Batch status, as `stagecoach batch status|list --json` and `job status --json` print it. */
  batches: (query = {}) => request('GET', '/ojs/v1/batches', { query }),
  batch: (id) => request('GET', batchPath(id)),
  batchJobs: (id, query = {}) => request('GET', `${batchPath(id)}/jobs`, { query }),
  job: (id) => request('GET', `/ojs/v1/jobs/${encodeURIComponent(id)}/status`),
  /** `job list`: `{ jobs, next_cursor }`, by tenant, queue, state, type, a page at a time. */
  jobs: (query = {}) => request('GET', '/ojs/v1/jobs', { query }),
  /** `batch cancel|pause|resume`: `{ action, batch, moved, kept }`. */
  cancelBatch: (id) => request('POST', `${batchPath(id)}/cancel`),
  pauseBatch: (id) => request('POST', `${batchPath(id)}/pause`),
  resumeBatch: (id) => request('POST', `${batchPath(id)}/resume`),
  /** Workflows (docs/workflows.md): `{ workflows, total }`, `{ workflow }` with every step, and cancel. */
  workflows: (query = {}) => request('GET', '/ojs/v1/workflows', { query }),
  workflow: (id) => request('GET', `/ojs/v1/workflows/${encodeURIComponent(id)}`),
  cancelWorkflow: (id) => request('DELETE', `/ojs/v1/workflows/${encodeURIComponent(id)}`),
  /** Schedules (`cron list`): `{ crons, count }`, each with its next and last run, run count and latest occurrences. */
  crons: () => request('GET', '/ojs/v1/cron'),
  triggerCron: (name, tenant) => request('POST', `${cronPath(name)}/trigger`, { tenant }),
  toggleCron: (name, tenant, enabled) => request('PATCH', cronPath(name), { json: { enabled }, tenant }),
};

/** A tenant's schedule is addressed with its tenant header (the admin acting for it). */
const cronPath = (name) => `/ojs/v1/cron/${encodeURIComponent(name)}`;
