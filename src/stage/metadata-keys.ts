/**
 * Every reflect-metadata key stagecoach writes, in one place. Keys are namespaced strings, not
 * symbols, so that a stage module resolving its own copy of stagecoach still interoperates.
 */
export const STAGE_METADATA = 'stagecoach:stage';
/** A stage's own middleware (`@Stage({ middleware })`), kept apart from its plain-data metadata. */
export const STAGE_MIDDLEWARE_METADATA = 'stagecoach:stage-middleware';
