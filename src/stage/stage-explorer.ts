import 'reflect-metadata';
import { STAGE_METADATA } from './metadata-keys.js';
import type { StageHandler, StageMetadata } from './stage.types.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- constructor parameters are whatever the stage injects
export type StageClass = new (...args: any[]) => StageHandler;

export interface DiscoveredStage {
  metadata: StageMetadata;
  target: StageClass;
}

/** Finds every class among a module's exports that `@Stage` decorated. */
export function exploreStages(moduleExports: Record<string, unknown>): DiscoveredStage[] {
  const found = new Map<StageClass, DiscoveredStage>();
  for (const value of Object.values(moduleExports)) {
    if (typeof value !== 'function') continue;
    const metadata = Reflect.getOwnMetadata(STAGE_METADATA, value) as StageMetadata | undefined;
    if (metadata) found.set(value as StageClass, { metadata, target: value as StageClass });
  }
  return [...found.values()];
}

export function stageMetadataOf(target: object): StageMetadata | undefined {
  return Reflect.getOwnMetadata(STAGE_METADATA, target) as StageMetadata | undefined;
}
