import { openConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import { createLogger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';

/**
 * Whether a scheduler leads now: the leadership queue exists (a passive declare: found, or
 * locked by the leader's connection). For `cron list` and `cron trigger`, which say when nothing
 * will fire.
 */
export async function leaderAlive(config: CompiledConfig): Promise<boolean> {
  const connection = await openConnection(config, createLogger({ component: 'leader-probe' }), 'stagecoach-leader-probe');
  try {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    try {
      await channel.checkQueue(new BrokerNames(config.prefix).schedulerLeader);
      return true;
    } catch (err) {
      // 405 RESOURCE_LOCKED: it exists, held by another connection; 404: no leader.
      return /RESOURCE.LOCKED|405/.test((err as Error).message);
    }
  } finally {
    await connection.close().catch(() => undefined);
  }
}
