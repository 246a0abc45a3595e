import { ConfigError } from '../errors/errors.js';
import type { BrokerSettings, RawConfig, ResolvedQueueConfig } from './config.types.js';

/**
 * The configuration rules of running on a RabbitMQ cluster, checked when the configuration is
 * compiled so that a mistake stops start-up with the key named (exit 2) rather than surfacing
 * later as a channel error from the broker in the middle of a declaration.
 */

/**
 * Queue arguments a quorum queue refuses on the RabbitMQ versions stagecoach supports (3.10 and
 * up): `x-max-priority` only arrived with 4.0, and even there it means two levels, not 1-9.
 * Everything else stagecoach declares or puts in policies (`max-length`, `max-length-bytes`,
 * `overflow` reject-publish / drop-head, `message-ttl`, dead-letter exchange and routing key) a
 * quorum queue takes.
 */
export function checkQueueType(source: string, queue: ResolvedQueueConfig, raw: RawConfig, durable: boolean): void {
  if (queue.type !== 'quorum') return;
  const key = `queues.${queue.name}`;
  if (queue.max_priority !== undefined) {
    // Name the layer that set it: the queue's own entry, or the `_default` it inherits from.
    const own = raw.queues?.[queue.name]?.max_priority !== undefined;
    throw new ConfigError(
      source,
      own ? `${key}.max_priority` : 'queues._default.max_priority',
      `no max_priority on a quorum queue ("${queue.name}" is type "quorum"; RabbitMQ before 4.0 refuses x-max-priority on quorum queues): remove it, or make the queue type "classic"`,
    );
  }
  if (!durable) {
    throw new ConfigError(
      source,
      'durable',
      `true when a queue is type "quorum" ("${queue.name}" is; quorum queues are always durable and RabbitMQ refuses a transient one)`,
    );
  }
}

/**
 * `broker.urls` names nodes of one cluster: one user (the broker checks `user_id` against the
 * user the connection logged in as, whichever node) and one virtual host (everything lives in
 * it). `broker.url`, when given with them, must be one of them.
 */
export function checkBrokerUrls(source: string, broker: BrokerSettings, raw: RawConfig): void {
  const urls = raw.broker?.urls;
  if (urls !== undefined && raw.broker?.url !== undefined && !urls.includes(raw.broker.url)) {
    throw new ConfigError(source, 'broker.url', 'one of broker.urls (or leave broker.url out: the first of broker.urls is used)');
  }
  const first = parts(broker.url);
  if (first === undefined)
    throw new ConfigError(source, raw.broker?.url === undefined ? 'broker.urls.0' : 'broker.url', 'a valid AMQP URL');
  // Keys name the entries as written (broker.urls puts broker.url first).
  (raw.broker?.urls ?? broker.urls).forEach((url, index) => {
    const key = `broker.urls.${index}`;
    const own = parts(url);
    if (own === undefined) throw new ConfigError(source, key, 'a valid AMQP URL');
    if (own.user !== first.user || own.vhost !== first.vhost) {
      throw new ConfigError(source, key, 'the same user and virtual host as the other nodes of the cluster');
    }
  });
  urls?.forEach((url, index) => {
    if (urls.indexOf(url) !== index) throw new ConfigError(source, `broker.urls.${index}`, 'a URL listed once');
  });
}

/** The user and virtual host of an AMQP URL (the default vhost `/` when it names none). */
function parts(url: string): { user: string; vhost: string } | undefined {
  try {
    const parsed = new URL(url);
    return { user: decodeURIComponent(parsed.username), vhost: decodeURIComponent(parsed.pathname.slice(1)) || '/' };
  } catch {
    return undefined;
  }
}
