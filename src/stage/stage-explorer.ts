import 'reflect-metadata';
import { STAGE_METADATA, STAGE_MIDDLEWARE_METADATA } from './metadata-keys.js';
import type { StageMiddleware } from './middleware/middleware.types.js';
import type { StageHandler, StageMetadata } from './stage.types.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- constructor parameters are whatever the stage injects
export type StageClass = new (...args: any[]) => StageHandler;

export interface DiscoveredStage {
  metadata: StageMetadata;
  target: StageClass;
  /** Its own middleware (`@Stage({ middleware })`); empty lists when it has none. */
  middleware: StageMiddleware;
}

const NO_MIDDLEWARE: StageMiddleware = Object.freeze({ enqueue: Object.freeze([]), execution: Object.freeze([]) });

/** Finds every class among a module's exports that `@Stage` decorated. */
export function exploreStages(moduleExports: Record<string, unknown>): DiscoveredStage[] {
  const found = new Map<StageClass, DiscoveredStage>();
  for (const value of Object.values(moduleExports)) {
    if (typeof value !== 'function') continue;
    const metadata = Reflect.getOwnMetadata(STAGE_METADATA, value) as StageMetadata | undefined;
    if (metadata) found.set(value as StageClass, { metadata, target: value as StageClass, middleware: stageMiddlewareOf(value) });
  }
  return [...found.values()];
}

export function stageMetadataOf(target: object): StageMetadata | undefined {
  return Reflect.getOwnMetadata(STAGE_METADATA, target) as StageMetadata | undefined;
}

/** The middleware `@Stage({ middleware })` recorded on a stage class; empty lists when none. */
export function stageMiddlewareOf(target: object): StageMiddleware {
  return (Reflect.getOwnMetadata(STAGE_MIDDLEWARE_METADATA, target) as StageMiddleware | undefined) ?? NO_MIDDLEWARE;
}
