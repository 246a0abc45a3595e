import { ApiError } from '../api-error.js';

/**
 * Endpoints of the OJS HTTP binding (spec/ojs-http-binding.md 2.1, 2.2; the progress extension)
 * that this server does not serve: a request to one is 422 `unsupported` (binding 16.3: the
 * feature needs a level or an extension the manifest does not claim), not a 404 that would read
 * as a typo. Consulted only when no route matched, so an endpoint served later takes precedence.
 */
const UNSERVED: ReadonlyArray<{ path: RegExp; feature: string }> = [
  { path: /^\/ojs\/v1\/schemas(\/.+)?$/, feature: 'the schema registry' },
  { path: /^\/ojs\/v1\/workers\/progress$/, feature: 'progress reporting (the progress extension)' },
  {
    path: /^\/ojs\/v1\/webhooks\/(subscriptions\/[^/]+\/(test|rotate-secret)|deliveries(\/.+)?)$/,
    feature: 'webhook test deliveries, secret rotation by the server and delivery logs (change "secret" with PATCH)',
  },
];

/** The 422 `unsupported` for a path no route serves, when it is one of the binding's; undefined otherwise. */
export function unsupportedEndpoint(method: string, path: string): ApiError | undefined {
  const trimmed = path.replace(/\/+$/, '');
  const found = UNSERVED.find((endpoint) => endpoint.path.test(trimmed));
  if (found === undefined) return undefined;
  return new ApiError(422, 'UNSUPPORTED', `${method} ${trimmed}: ${found.feature} is not served by this server (GET /ojs/manifest)`, {
    feature: found.feature,
  });
}
