/**
 * Every per-queue setting, declared once: its JSON Schema, default, unit, who enforces it and its
 * doc line. The rest is derived from here: the `QueueSettings` type, the system defaults, the
 * resolver's layering, the admin API's views and what a tenant may override; the shipped JSON
 * Schema and docs/configuration.md's "Queue settings" table are written from it
 * (`npm run settings:write`) and a unit test keeps them equal. A new setting is one entry here
 * plus the code that enforces it.
 *
 * Every setting can be written for a queue, for `_default`, and per tenant for a tenant-scoped
 * queue (OJS queue configuration 7.2 and 8.5); `null` means none (unlimited), overriding an
 * inherited value.
 */

/** `limit` job starts per `period` (ISO 8601 duration, at least 10 ms, at most a day). */
export interface LimitWindow {
  /** A whole number >= 1 (at most 10,000). */
  limit: number;
  period: string;
}

/** `queues.<q>.retention`: ISO 8601 durations by final job state (docs/job-state.md). */
export interface JobRetention {
  completed?: string;
  discarded?: string;
  cancelled?: string;
}

/**
 * Who applies a setting, which says when a change takes effect:
 * - `policy`, `dead-letter policy`: a RabbitMQ policy on the main (or dead-letter) physical
 *   queues, changed in place by `apply`;
 * - `flow tokens`: every stage reading the queue, through tokens on the broker, at once;
 * - `stage start`: read by a stage when it starts;
 * - `producers`: `Publisher`, `ctx.emit` and HTTP pushes, at their next job;
 * - `admin server`: the HTTP binding, at its next push;
 * - `tracker`: `stagecoach tracker`, at its next prune.
 */
export type SettingEnforcer = 'policy' | 'dead-letter policy' | 'flow tokens' | 'stage start' | 'producers' | 'admin server' | 'tracker';

export interface SettingDeclaration<T> {
  /** JSON Schema of a written value; `#/definitions/...` refer to the shipped schema's own. */
  readonly schema: Readonly<Record<string, unknown>>;
  /** The system default (layer 1 of OJS queue configuration 7.2); undefined: none, unlimited. */
  readonly default: Exclude<T, null> | undefined;
  /** The unit or range of a value, as the docs say it. */
  readonly unit: string;
  readonly enforcedBy: SettingEnforcer;
  /** One sentence or two: what the setting does. Also the JSON Schema's description. */
  readonly doc: string;
}

declare const valueType: unique symbol;

/** A declaration as written (its default's literal type kept), branded with its value's type. */
type Declared<T, D> = D & { readonly [valueType]?: T };

/** Declares a setting whose written values are `T`. */
const setting =
  <T>() =>
  <const D extends SettingDeclaration<T>>(declaration: D): Declared<T, D> =>
    declaration;

const MAX_SAFE = 9_007_199_254_740_991;
const bound = (minimum: number, maximum: number): Record<string, unknown> => ({ type: ['integer', 'null'], minimum, maximum });
const orNull = (ref: string): Record<string, unknown> => ({ anyOf: [{ $ref: ref }, { type: 'null' }] });

export const QUEUE_SETTINGS = {
  max_size: setting<number | null>()({
    schema: bound(1, MAX_SAFE),
    default: undefined,
    unit: 'jobs, an integer from 1 to 2^53-1',
    enforcedBy: 'policy',
    doc: 'Most jobs in each main physical queue (policy max-length).',
  }),
  max_size_bytes: setting<number | null>()({
    schema: bound(1, MAX_SAFE),
    default: undefined,
    unit: 'bytes, an integer from 1 to 2^53-1',
    enforcedBy: 'policy',
    doc: 'Most bytes of job bodies in each main physical queue (policy max-length-bytes).',
  }),
  max_size_warning: setting<number>()({
    schema: { type: 'number', minimum: 0, maximum: 1 },
    default: 0.8,
    unit: 'a fraction of max_size, from 0 to 1',
    enforcedBy: 'admin server',
    doc: 'From this share of max_size, an HTTP push into the queue is answered with its pressure (X-OJS-Queue-Depth, X-OJS-Queue-Bound, X-OJS-Queue-Pressure), so that a producer slows down before it is refused.',
  }),
  overflow_policy: setting<'reject' | 'drop_oldest' | 'block'>()({
    schema: { enum: ['reject', 'drop_oldest', 'block'] },
    default: 'reject',
    unit: 'reject, drop_oldest or block',
    enforcedBy: 'policy',
    doc: 'What a full queue does: reject (the publish is refused with QUEUE_FULL), drop_oldest (the oldest job is dead-lettered to make room) or block (the publish is refused, and the producer waits for room and tries again, up to block_timeout).',
  }),
  block_timeout: setting<string>()({
    schema: { $ref: '#/definitions/duration' },
    default: 'PT30S',
    unit: 'ISO 8601 duration; PT0S: at once',
    enforcedBy: 'producers',
    doc: 'With overflow_policy block: how long a producer (Publisher, ctx.emit) waits for room in the full queue, from the first refusal, before it fails with QUEUE_FULL; a stage emitting into it holds its input job meanwhile.',
  }),
  dead_letter_ttl: setting<string | null>()({
    schema: orNull('#/definitions/duration'),
    default: 'P30D',
    unit: 'ISO 8601 duration, at most 49 days; null: until purged',
    enforcedBy: 'dead-letter policy',
    doc: 'How long dead letters are kept (policy message-ttl of the dead-letter queues); an expired dead letter is dropped.',
  }),
  dead_letter_max_size: setting<number | null>()({
    schema: bound(1, MAX_SAFE),
    default: undefined,
    unit: 'dead letters, an integer from 1 to 2^53-1',
    enforcedBy: 'dead-letter policy',
    doc: 'Most dead letters kept; the oldest is dropped to make room (policy max-length, drop-head).',
  }),
  concurrency: setting<number | null>()({
    schema: bound(0, 10_000),
    default: undefined,
    unit: 'jobs, an integer from 0 to 10,000',
    enforcedBy: 'flow tokens',
    doc: 'Most jobs active at once from each physical queue, across every process and replica that reads it (tokens on the broker: docs/flow-control.md). 0 runs nothing.',
  }),
  rate_limit: setting<LimitWindow | null>()({
    schema: orNull('#/definitions/limitWindow'),
    default: undefined,
    unit: '{ limit, period }: job starts (1 to 10,000) per ISO 8601 period',
    enforcedBy: 'flow tokens',
    doc: 'Most job starts from each physical queue in any window of period (a sliding window), across every process.',
  }),
  events: setting<boolean>()({
    schema: { type: 'boolean' },
    default: false,
    unit: 'true or false',
    enforcedBy: 'stage start',
    doc: "Publish the OJS job events of the queue's jobs (job.completed, job.failed, job.discarded, job.cancelled) on <prefix>.events, from the stage that settles them, after the acknowledgement (best effort).",
  }),
  tracking: setting<boolean>()({
    schema: { type: 'boolean' },
    default: true,
    unit: 'true or false',
    enforcedBy: 'producers',
    doc: 'Report every job of the queue to the tracking stream (at enqueue and each settlement), folded by stagecoach tracker into the job store (job status, job list, job cancel: docs/job-state.md). false: only batched jobs are reported, at no cost per job.',
  }),
  retention: setting<JobRetention>()({
    schema: {
      type: 'object',
      additionalProperties: false,
      properties: Object.fromEntries(['completed', 'discarded', 'cancelled'].map((state) => [state, { $ref: '#/definitions/duration' }])),
    },
    default: { completed: 'P7D', discarded: 'P30D', cancelled: 'P7D' },
    unit: 'ISO 8601 durations by end state; a state left out keeps its default',
    enforcedBy: 'tracker',
    doc: 'How long the job store keeps a job after it ended, by end state (OJS queue configuration 6.3); pruned by the tracker. Dead letters on the broker keep their own dead_letter_ttl.',
  }),
} as const;

export type QueueSettingName = keyof typeof QUEUE_SETTINGS;

/** The value type of one declared setting, `null` included where it means none. */
export type SettingValue<D> = D extends { readonly [valueType]?: infer T } ? T : never;

type Declaration<K extends QueueSettingName> = (typeof QUEUE_SETTINGS)[K];
/** The settings that always have a value once layered: a default, and no `null` to remove it. */
type Defaulted = {
  [K in QueueSettingName]: Declaration<K>['default'] extends undefined ? never : null extends SettingValue<Declaration<K>> ? never : K;
}[QueueSettingName];

/** The settings of a queue as written (raw configuration, a tenant's own, an API body). */
export type QueueSettings = { -readonly [K in QueueSettingName]?: SettingValue<(typeof QUEUE_SETTINGS)[K]> };

/**
 * The settings of a queue after layering (`settingsFor`): `null` became absent, and every setting
 * with a default has a value (`dead_letter_ttl` too, unless a layer wrote `null`).
 */
export type ResolvedQueueSettings = { -readonly [K in Defaulted]: NonNullable<SettingValue<Declaration<K>>> } & {
  -readonly [K in Exclude<QueueSettingName, Defaulted>]?: NonNullable<SettingValue<Declaration<K>>>;
};

/** Every setting's name, in declaration order. */
export const SETTING_KEYS = Object.keys(QUEUE_SETTINGS) as QueueSettingName[];

/** The system defaults of the settings that have one (OJS queue configuration 7.2, layer 1). */
export const SYSTEM_QUEUE_SETTINGS = Object.fromEntries(
  SETTING_KEYS.filter((key) => QUEUE_SETTINGS[key].default !== undefined).map((key) => [key, QUEUE_SETTINGS[key].default]),
) as {
  readonly [K in QueueSettingName as Declaration<K>['default'] extends undefined ? never : K]: NonNullable<SettingValue<Declaration<K>>>;
};

/** The settings a given party applies. */
export function settingsEnforcedBy(...enforcers: SettingEnforcer[]): QueueSettingName[] {
  return SETTING_KEYS.filter((key) => enforcers.includes(QUEUE_SETTINGS[key].enforcedBy));
}
