/**
 * The control protocol: JSON messages on the fanout exchange `<prefix>.control`, sent by
 * `send-control.ts` (the command line) and read by every running stage through
 * `control-listener.ts`.
 */

/**
 * Queue states (OJS queue configuration section 5) and worker states (OJS core section 10) sent to
 * running stages, and `directive`: a batch's or a tenant's directive markers changed (cancel,
 * pause, resume; see src/directives/batch-directives.ts), so stages read them again; `limits`: the flow
 * limits in the configuration file changed (the admin API, `apply`), so stages read it again;
 * `excuse`: a process that lives lost these deliveries with a channel or its connection (see
 * LossLedger): whoever they come back to redelivered takes them for first deliveries, not crashes;
 * `timed-out`: the broker's `consumer_timeout` took these jobs from a process that was running
 * them: whoever they come back to dead-letters them instead of running them again.
 */
export type ControlCommand = 'pause' | 'resume' | 'drain' | 'quiet' | 'terminate' | 'directive' | 'limits' | 'excuse' | 'timed-out';

export interface ControlMessage {
  command: ControlCommand;
  /** Logical queue, for pause, resume and drain. */
  queue?: string;
  /** Only instances serving this tenant; all when absent. */
  tenant?: string;
  /** Only instances of this stage, for quiet and terminate; all when absent. */
  stage?: string;
  /** The batch a `directive` is about (else `tenant` names the tenant it is about). */
  batch?: string;
  /** `limits`: flow-limit partitions a handler found limited downstream, held until `until` (else the file is read again). */
  hold?: string[];
  /** `limits` with `hold`: ISO 8601 timestamp. */
  until?: string;
  /** `excuse`, `timed-out`: the message ids. */
  ids?: string[];
  /** `timed-out`: the timeout they met, ms. */
  timeout_ms?: number;
}

const COMMANDS: readonly string[] = ['pause', 'resume', 'drain', 'quiet', 'terminate', 'directive', 'limits', 'excuse', 'timed-out'];

/** Parses a control message body; undefined for anything else (ignored, never fatal). */
export function parseControlMessage(content: Buffer): ControlMessage | undefined {
  try {
    const value = JSON.parse(content.toString('utf8')) as Record<string, unknown>;
    if (typeof value !== 'object' || value === null || !COMMANDS.includes(value.command as string)) return undefined;
    for (const key of ['queue', 'tenant', 'stage', 'batch', 'until'])
      if (value[key] !== undefined && typeof value[key] !== 'string') return undefined;
    if (value.hold !== undefined && !(Array.isArray(value.hold) && value.hold.every((p) => typeof p === 'string'))) return undefined;
    if (value.ids !== undefined && !(Array.isArray(value.ids) && value.ids.every((id) => typeof id === 'string'))) return undefined;
    if (value.timeout_ms !== undefined && !(Number.isFinite(value.timeout_ms) && (value.timeout_ms as number) >= 0)) return undefined;
    return value as unknown as ControlMessage;
  } catch {
    return undefined;
  }
}
