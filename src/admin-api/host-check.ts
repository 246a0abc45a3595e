export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/**
 * Whether a request to a server bound to `boundHost` may be answered, judged by its `Host`
 * header. A server on a loopback address answers only requests that name a loopback host: a web
 * page elsewhere can resolve its own name to 127.0.0.1 (DNS rebinding) and read the open GETs
 * (job bodies in dead letters) through the operator's browser, but its requests still carry its
 * own name. A server bound elsewhere was exposed on purpose and answers any name.
 */
export function hostAllowed(boundHost: string, hostHeader: string | undefined): boolean {
  if (!LOOPBACK_HOSTS.has(boundHost)) return true;
  if (hostHeader === undefined) return false;
  let hostname: string;
  try {
    hostname = new URL(`http://${hostHeader}`).hostname;
  } catch {
    return false;
  }
  return LOOPBACK_HOSTS.has(hostname);
}
