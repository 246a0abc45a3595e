import type { CompiledConfig } from '../config/config.types.js';
import { BrokerNames } from './names.js';
import type { ExchangeSpec, QueueSpec } from './topology.types.js';

/**
 * The batch-tracking stream (docs/batches.md): in the core, because every stage reports batched
 * settlements to it, through the fanout exchange of the same name (trackingExchange), where a
 * missing stream would drop the report silently (and confirm it). Always durable: RabbitMQ
 * streams cannot be anything else.
 */
export function trackingStream(config: CompiledConfig): QueueSpec {
  return {
    name: new BrokerNames(config.prefix).tracking,
    durable: true,
    arguments: { 'x-queue-type': 'stream', 'x-max-age': `${config.tracking.maxAgeSeconds}s` },
  };
}

/**
 * The way into the tracking stream: a fanout exchange named like it, bound to it. Not the default
 * exchange: publishing there needs write on `amq.default`, which reaches every queue by name, so
 * a tenant user (security.tenantUsers) may not have it; write on `<prefix>.tracking` opens
 * nothing but the stream. Durable, like the stream it feeds.
 */
export function trackingExchange(config: CompiledConfig): ExchangeSpec {
  return { name: new BrokerNames(config.prefix).tracking, type: 'fanout', durable: true };
}

/**
 * The stream of `job cancel` directives (docs/job-state.md), read from its start by every stage
 * (the set of cancelled job ids), kept as long as the tracking stream. In the core for the same
 * reason as the tracking stream: a missing stream would drop a cancel silently.
 */
export function jobCancelsStream(config: CompiledConfig): QueueSpec {
  return { ...trackingStream(config), name: new BrokerNames(config.prefix).jobCancels };
}

/** The way into the job-cancels stream, as trackingExchange is into the tracking stream. */
export function jobCancelsExchange(config: CompiledConfig): ExchangeSpec {
  return { name: new BrokerNames(config.prefix).jobCancels, type: 'fanout', durable: true };
}

/**
 * The schedules stream (docs/schedules.md): every registration and what became of every
 * occurrence, read from its start by whoever needs schedules. Kept by size, not age: the leader
 * writes a snapshot of the whole state every SNAPSHOT_EVERY records, far less than the stream
 * keeps, so a reader from the start always finds the state whole.
 */
export function schedulesStream(config: CompiledConfig): QueueSpec {
  return {
    name: new BrokerNames(config.prefix).schedules,
    durable: true,
    arguments: {
      'x-queue-type': 'stream',
      'x-max-length-bytes': SCHEDULES_STREAM_BYTES,
      'x-stream-max-segment-size-bytes': 16 * 1024 * 1024,
    },
  };
}

/** How many bytes the schedules stream keeps: 1 GiB. */
export const SCHEDULES_STREAM_BYTES = 1024 * 1024 * 1024;

/** The way into the schedules stream, as trackingExchange is into the tracking stream. */
export function schedulesExchange(config: CompiledConfig): ExchangeSpec {
  return { name: new BrokerNames(config.prefix).schedules, type: 'fanout', durable: true };
}
