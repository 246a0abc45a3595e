import { openConnection } from '../../broker/amqp-connection.js';
import { exclusiveRead } from '../../broker/peek.js';
import { fromWire, OJS_HEADERS, PENDING_PARK } from '../../job/amqp-mapping.js';
import type { HeaderValue } from '../../job/job.types.js';
import { BrokerNames } from '../../topology/names.js';
import type { BindingContext } from './binding-context.js';

/** What becomes of a held job: sent on to its queue (ACTIVATE), or dropped (CANCEL). */
export type PendingRelease = 'activate' | 'drop';

/**
 * Finds the job `id` held pending in the parked queue (publisher/pending-hold.ts) and activates
 * it (sent on to its queue by the binding's publisher, reported available) or drops it. One pass
 * over the parked queue as it is now, under the prefix's read lock (broker/peek.ts exclusiveRead:
 * a `resume` or a listing never holds the same messages at once); every other message goes back,
 * in its order, when the channel closes. The held job is acknowledged only once it is confirmed
 * in its queue: a failed send (a full queue) leaves it held, and its error is the caller's.
 * @returns whether the job was found held.
 */
export async function releasePending(ctx: BindingContext, id: string, release: PendingRelease): Promise<boolean> {
  const config = await ctx.admin.configFile.load();
  const publisher = release === 'activate' ? await ctx.publisher() : undefined;
  const names = new BrokerNames(config.prefix);
  return exclusiveRead(config, ctx.admin.log, async () => {
    const connection = await openConnection(config, ctx.admin.log, 'stagecoach-activate');
    try {
      const channel = await connection.createChannel();
      const { messageCount } = await channel.checkQueue(names.parked);
      for (let i = 0; i < messageCount; i++) {
        const message = await channel.get(names.parked, { noAck: false });
        if (message === false) return false;
        const headers = message.properties.headers ?? {};
        if (message.properties.messageId !== id || headers[OJS_HEADERS.parkedBy] !== PENDING_PARK) continue;
        if (publisher !== undefined) {
          const { job } = fromWire(message, config.tenantHeader);
          const traceparent = headers[OJS_HEADERS.traceparent];
          await publisher.activate(job, {
            ...(typeof traceparent === 'string' ? { traceparent } : {}),
            headers: ownHeaders(headers),
          });
        }
        channel.ack(message);
        // Closing a channel right after an ack may lose it: wait for the broker to have it.
        await channel.checkQueue(names.parked);
        return true;
      }
      return false;
    } finally {
      await connection.close().catch(() => undefined);
    }
  });
}

/** The headers the producer gave (a variant's `mime`...): the `x-ojs-*` ones are the envelope's, made again. */
function ownHeaders(headers: Record<string, unknown>): Record<string, HeaderValue> {
  const own: Record<string, HeaderValue> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith('x-') || !['string', 'number', 'boolean'].includes(typeof value)) continue;
    own[name] = value as HeaderValue;
  }
  return own;
}
