import type { CompiledConfig } from '../config/config.types.js';
import { BrokerNames } from './names.js';
import { ladderTypeArguments, sharedQueueType } from './queue-type.js';
import type { BindingSpec, Topology } from './topology.types.js';

/**
 * Delays on the broker without plugins: a binary ladder of TTL queues, as NServiceBus and
 * Celery 5.5 build it. Level k holds a message for 2^k seconds; a delay of d seconds is written
 * in binary into the routing key (highest level first), and each level either parks the message
 * in its queue (bit 1) or passes it straight down (bit 0). After level 0 the delivery exchange
 * routes it, by the destination written after the bits, back to the physical queue it came from.
 *
 *   ojs.retry --#--> ojs.delay.19 --bit 1--> queue ojs.delay.19 (TTL 2^19 s) --DLX--> ojs.delay.18 ...
 *                                 --bit 0--> ojs.delay.18 ...            ... ojs.delay.0 --> ojs.delay.deliver --> queue
 *
 * Every message in a level's queue has the same TTL, so they expire in arrival order and the
 * broker's head-of-queue expiry is exact. The set is fixed: DELAY_LEVELS queues whatever the
 * number of tenants, queues or distinct delays; each physical queue adds one binding.
 */
export const DELAY_LEVELS = 20;
/** The longest delay the ladder holds: 2^20 - 1 s, about 12 days. Longer delays are capped. */
export const MAX_DELAY_SECONDS = 2 ** DELAY_LEVELS - 1;

export function delayTopology(config: CompiledConfig): Topology {
  const names = new BrokerNames(config.prefix);
  const durable = config.durable;
  const typeArguments = ladderTypeArguments(sharedQueueType(config));
  const topology: Topology = {
    exchanges: [
      { name: names.retry, type: 'topic', durable },
      { name: names.delayDeliver, type: 'topic', durable, alternateExchange: names.unroutable },
    ],
    queues: [],
    bindings: [{ source: names.retry, destination: names.delayLevel(DELAY_LEVELS - 1), destinationType: 'exchange', routingKey: '#' }],
  };
  for (let level = DELAY_LEVELS - 1; level >= 0; level--) {
    const exchange = names.delayLevel(level);
    const below = level === 0 ? names.delayDeliver : names.delayLevel(level - 1);
    const skip = '*.'.repeat(DELAY_LEVELS - 1 - level);
    topology.exchanges.push({ name: exchange, type: 'topic', durable });
    topology.queues.push({
      name: exchange,
      durable,
      arguments: { ...typeArguments, 'x-message-ttl': 2 ** level * 1000, 'x-dead-letter-exchange': below },
    });
    topology.bindings.push(
      { source: exchange, destination: exchange, destinationType: 'queue', routingKey: `${skip}1.#` },
      { source: exchange, destination: below, destinationType: 'exchange', routingKey: `${skip}0.#` },
    );
  }
  return topology;
}

/** The binding that brings delayed jobs back to one physical queue. */
export function delayDeliveryBinding(config: CompiledConfig, queue: string): BindingSpec {
  const names = new BrokerNames(config.prefix);
  return { source: names.delayDeliver, destination: queue, destinationType: 'queue', routingKey: `${'*.'.repeat(DELAY_LEVELS)}${queue}` };
}

/**
 * The routing key that delays a message by `delayMs` (rounded to whole seconds, capped at
 * MAX_DELAY_SECONDS) and then delivers it to the physical queue `queue`.
 */
export function delayRoutingKey(delayMs: number, queue: string): string {
  // NaN would read as "no delay": a retry loop. Policies are validated; this catches the rest.
  if (Number.isNaN(delayMs)) throw new RangeError(`a delay must be a number of milliseconds, got ${delayMs}`);
  const seconds = Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.round(delayMs / 1000)));
  const bits: string[] = [];
  for (let level = DELAY_LEVELS - 1; level >= 0; level--) bits.push(seconds & (2 ** level) ? '1' : '0');
  return `${bits.join('.')}.${queue}`;
}
