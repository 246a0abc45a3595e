/**
 * Every reflect-metadata key stagecoach writes, in one place. Keys are namespaced strings, not
 * symbols, so that a stage module resolving its own copy of stagecoach still interoperates.
 */
export const STAGE_METADATA = 'stagecoach:stage';
