import type { ApiResponse } from '../router.js';
import { openConnection } from '../../broker/amqp-connection.js';
import { managementClientOf } from '../../broker-management/management-client.js';
import { vhostOfAmqpUrl } from '../../security/broker-users.js';
import type { BindingContext } from './binding-context.js';
import { scheduleRecord } from '../../schedule/schedule-records.js';

/**
 * `POST /ojs/v1/admin/reset`, served only with `stagecoach admin --test-reset` (never in
 * production): deletes every job of the prefix. Every queue of the prefix is purged (streams
 * cannot be, and need not: the job store forgets what they told it; the flow limits' tokens are
 * not jobs and stay) and the job store and the
 * envelopes pushed here are cleared, and every schedule removed. The conformance runner calls it before each case.
 * Jobs held unacknowledged by a consumer are not purged: the broker still owns them.
 */
export async function resetJobs(ctx: BindingContext): Promise<ApiResponse> {
  return ctx.admin.serializer.run(async () => {
    const config = await ctx.admin.configFile.load();
    // Held jobs first: handed back to their queues, then purged with them.
    await ctx.remote.stopAll();
    const queues = (await managementClientOf(config).listQueues(vhostOfAmqpUrl(config.broker.url))).filter(
      // Not streams (they cannot be purged), nor exclusive queues (locks: the scheduler's leadership,
      // the workflow lock, a read's), nor the flow limits' tokens (`<prefix>.flow.`: not jobs; a
      // bucket purged stays empty, and the next case's jobs would wait for tokens that never come).
      (queue) =>
        queue.name.startsWith(`${config.prefix}.`) &&
        !queue.name.startsWith(`${config.prefix}.flow.`) &&
        queue.type !== 'stream' &&
        !queue.exclusive,
    );
    let purged = 0;
    const connection = await openConnection(config, ctx.admin.log, 'stagecoach-test-reset');
    try {
      const channel = await connection.createChannel();
      for (const queue of queues) purged += (await channel.purgeQueue(queue.name)).messageCount;
      await channel.close();
    } finally {
      await connection.close().catch(() => undefined);
    }
    const forgotten = await (await ctx.admin.jobs()).clear();
    // The schedules too: the cases register names again and again.
    await ctx.admin.schedules.append(scheduleRecord({ kind: 'clear' }));
    ctx.envelopes.clear();
    ctx.retries.clear();
    ctx.settlements.clear();
    ctx.events.clear();
    ctx.workers.clear();
    ctx.progress.clear();
    ctx.admin.log.warn('test reset: every job of the prefix deleted', { prefix: config.prefix, queues: queues.length, purged, forgotten });
    return { status: 200, body: { status: 'ok', queues: queues.length, purged, forgotten } };
  });
}
