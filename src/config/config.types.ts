/**
 * Configuration, in the three steps it goes through:
 *
 * 1. {@link RawConfig}: the JSON file as written (every field optional but `stages`).
 * 2. {@link ConfigWithDefaults}: `withDefaults()` merged the system defaults and `_default`.
 * 3. {@link CompiledConfig}: `compileConfig()` validated it against the shipped JSON Schema
 *    (`schema/stagecoach.schema.json`) and resolved names, durations and module paths.
 *
 * The first is in raw-config.types.ts, the other two in compiled-config.types.ts; this module
 * re-exports both, so that every type is imported from here.
 *
 * Field names inside `queues.*` follow the OJS queue configuration extension (snake_case);
 * stagecoach's own fields are camelCase.
 */
export type * from './raw-config.types.js';
export type * from './compiled-config.types.js';
export type * from './schedule-config.types.js';
