/** Injection tokens stagecoach binds in every stage's container. */

/** The stage's winston logger (`Logger`). */
export const LOGGER = Symbol.for('stagecoach:logger');
/** The compiled configuration (`CompiledConfig`). */
export const CONFIG = Symbol.for('stagecoach:config');
/** `stages.<name>.options` from the configuration (`Record<string, unknown>`). */
export const STAGE_OPTIONS = Symbol.for('stagecoach:stage-options');
/** The tenant this instance serves, or undefined for a shared stage (`string | undefined`). */
export const TENANT = Symbol.for('stagecoach:tenant');
/** The variant queue this instance consumes, or undefined for the general queue (`string | undefined`). */
export const VARIANT = Symbol.for('stagecoach:variant');
