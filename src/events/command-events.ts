import type { AdminEventSink } from './admin-events.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { EventPublisher } from './event-publisher.js';

/**
 * Runs one administration command with an event sink (source `stagecoach/<command>`), and sends
 * its events before returning: the publisher connects at the first event only, and is closed
 * (its events confirmed or their failure logged) whether the command succeeded or threw.
 */
export async function withCommandEvents<T>(
  config: CompiledConfig,
  command: string,
  log: Logger,
  action: (onEvent: AdminEventSink) => Promise<T>,
): Promise<T> {
  const events = new EventPublisher(config, { source: `stagecoach/${command}`, log });
  try {
    return await action(events.sink);
  } finally {
    await events.close();
  }
}
