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

/**
 * Whether a request is the binding's: its answer (errors included) is `OJS_MEDIA_TYPE` in the
 * binding's shapes, whatever `Accept` says (binding 4.3: one shape per path).
 */
export function isBindingRequest(path: string): boolean {
  return BINDING_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}
