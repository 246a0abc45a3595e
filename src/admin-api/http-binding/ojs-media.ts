/** The OJS HTTP binding's media type (spec/ojs-http-binding.md section 3): compared exactly, no charset. */
export const OJS_MEDIA_TYPE = 'application/openjobspec+json';
/** Sent as `OJS-Version` on every answer of `stagecoach admin`. */
export const OJS_VERSION = '1.0';

/** The paths of the binding (the queue admin API beside it keeps `application/json`). */
const BINDING_PREFIXES: readonly string[] = [
  '/ojs/manifest',
  '/ojs/v1/jobs',
  '/ojs/v1/workers',
  '/ojs/v1/health',
  '/ojs/v1/admin',
  '/ojs/v1/dead-letter',
  '/ojs/v1/events',
  '/ojs/v1/workflows',
];

/** Reads of jobs the queue admin API answered before the binding (`job status --json`'s shape). */
const SHARED_READS = /^\/ojs\/v1\/jobs(\/[^/]+)?\/?$/;

/**
 * Whether a request is the binding's: its answer (errors included) is `OJS_MEDIA_TYPE` in the
 * binding's shapes. `GET /ojs/v1/jobs[/{id}]` and `DELETE /ojs/v1/jobs/{id}` are shared with the
 * admin API and negotiated: the binding's when `Accept` names `OJS_MEDIA_TYPE` (every OJS client
 * sends it), `job status --json`'s shape otherwise (docs/http-binding.md).
 */
export function isBindingRequest(method: string, path: string, accept: string | undefined): boolean {
  if (!BINDING_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`))) return false;
  if ((method === 'GET' || method === 'DELETE') && SHARED_READS.test(path)) return acceptsOjs(accept);
  return true;
}

export function acceptsOjs(accept: string | undefined): boolean {
  return accept !== undefined && accept.toLowerCase().includes(OJS_MEDIA_TYPE);
}
