import type { CompiledConfig } from '../../config/config.types.js';
import { loadConfig } from '../../config/load-config.js';
import type { ControlMessage } from '../../control/control-protocol.js';
import type { FlowControl } from '../../flow/flow-control.js';
import type { Logger } from '../../logging/logger.js';

/**
 * A `limits` control message to the process's flow control (docs/flow-control.md): partitions a
 * handler found limited downstream are held until the time given; otherwise the limits changed
 * in the configuration file the process was started with (the admin API, `limits set`,
 * `apply`), which is read again and takes effect at once. A configuration given inline (no file)
 * keeps its limits: `StageGroup.updateLimits` takes a new one.
 */
export function limitsControl(flow: FlowControl, config: CompiledConfig, log: Logger): (message: ControlMessage) => Promise<void> {
  return async (message) => {
    if (message.hold !== undefined && message.until !== undefined) {
      flow.hold(message.hold, Date.parse(message.until));
      return;
    }
    if (config.source === '<inline>') return;
    try {
      flow.update(await loadConfig(config.source));
    } catch (err) {
      log.error('flow limits not reloaded: the configuration file does not load', { err: (err as Error).message });
    }
  };
}
