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
  // Every request asks, with one of a few headers: each is parsed once (a bounded memory).
  let allowed = judged.get(hostHeader);
  if (allowed === undefined) {
    if (judged.size >= JUDGED_HOSTS) judged.clear();
    allowed = loopbackName(hostHeader);
    judged.set(hostHeader, allowed);
  }
  return allowed;
}

/** Most `Host` headers remembered; past it, the memory starts again. */
const JUDGED_HOSTS = 256;
const judged = new Map<string, boolean>();

function loopbackName(hostHeader: string): boolean {
  let hostname: string;
  try {
    hostname = new URL(`http://${hostHeader}`).hostname;
  } catch {
    return false;
  }
  return LOOPBACK_HOSTS.has(hostname);
}
