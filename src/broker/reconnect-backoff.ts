/** `broker.reconnect`: seconds. */
export interface ReconnectSettings {
  initialDelay: number;
  maxDelay: number;
}

/**
 * The wait before reconnect attempt `attempt` (0 for the first retry), in milliseconds:
 * initialDelay * 2^attempt seconds, times a jitter factor in [0.5, 1.5), capped at maxDelay.
 *
 * @param random a value in [0, 1) that picks the jitter factor.
 */
export function reconnectDelayMs(attempt: number, settings: ReconnectSettings, random: number = Math.random()): number {
  // Jitter before the cap: maxDelay is a promise to the operator, and instances that lost the
  // broker together still spread out below it.
  const jittered = settings.initialDelay * 2 ** attempt * (0.5 + random);
  return Math.min(settings.maxDelay, jittered) * 1000;
}
