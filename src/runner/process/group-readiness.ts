import type { Blocked } from '../../broker/blocked-watch.js';

/** The answer of `/readyz`: `reason` says what is missing when not ready. */
export interface Readiness {
  ready: boolean;
  reason?: string;
  /**
   * Set while the broker blocks the connection (a resource alarm). Not a reason to be unready:
   * the process is alive and resumes by itself when the alarm clears, and a restart would only
   * hand its jobs back to a broker that blocks the next connection the same way.
   */
  blocked?: Blocked;
}

/** Names of runners not consuming that readiness spells out. */
const READINESS_NAMES = 5;

/**
 * Ready when connected, past starting, and every runner consumes or is meant not to (paused,
 * quiet): what an orchestrator may route work and rollouts by.
 */
export function readinessOf(
  connected: boolean,
  /** From the first attach on (before it: connecting, checking tenants, provisioning). */
  started: boolean,
  runners: ReadonlyArray<{ readonly healthy: boolean; readonly name: string }>,
  blocked?: Blocked,
  /** How long the broker has said nothing, once past `broker.stallTimeout` (StallWatch). */
  silentMs?: number,
  /** The broker closed the flow-control token channel (a token held past its consumer_timeout): no limited job starts until it is back. */
  tokensDown = false,
): Readiness {
  const detail = blocked === undefined ? {} : { blocked };
  if (connected && silentMs !== undefined) {
    return { ready: false, reason: `no answer from the broker for ${Math.round(silentMs / 1000)} s (the connection looks cut)`, ...detail };
  }
  if (connected && started && tokensDown) return { ready: false, reason: 'flow-control token channel down (re-opening it)', ...detail };
  return { ...readinessOfRunners(connected, started, runners), ...detail };
}

function readinessOfRunners(
  connected: boolean,
  started: boolean,
  runners: ReadonlyArray<{ readonly healthy: boolean; readonly name: string }>,
): Readiness {
  if (!connected) return { ready: false, reason: 'not connected to the broker' };
  if (!started) return { ready: false, reason: 'starting' };
  const down = runners.filter((r) => !r.healthy);
  if (down.length > 0) {
    // A thousand tenants' names would make the answer unreadable: a count and the first few.
    const named = down.slice(0, READINESS_NAMES).map((r) => r.name);
    const more = down.length > READINESS_NAMES ? ` and ${down.length - READINESS_NAMES} more` : '';
    return { ready: false, reason: `not consuming (${down.length} of ${runners.length}): ${named.join(', ')}${more}` };
  }
  return { ready: true };
}
