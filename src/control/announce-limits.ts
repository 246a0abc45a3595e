import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { sendControl } from './send-control.js';

/**
 * Tells running stages that the flow limits in the configuration file changed (a `limits`
 * control message: each reads the file again; docs/flow-control.md). The file is written
 * already, so a broker that does not take the message fails nothing: the stages take the
 * limits at their next start, and the warning says so.
 */
export async function announceLimits(config: CompiledConfig, log: Logger, fields: Record<string, unknown> = {}): Promise<void> {
  await sendControl(config, { command: 'limits' }, log).catch((err: Error) =>
    log.warn('running stages not told of the changed limits: they take them at their next start', { ...fields, err: err.message }),
  );
}
