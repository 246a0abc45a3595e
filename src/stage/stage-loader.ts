import { pathToFileURL } from 'node:url';
import { ContainerModule } from 'inversify';
import type { CompiledConfig } from '../config/config.types.js';
import { StageNotFoundError } from '../errors/errors.js';
import { exploreStages, type DiscoveredStage } from './stage-explorer.js';

export interface LoadedStage extends DiscoveredStage {
  /** `ContainerModule`s the stage module exports: its own services, bound before the stage. */
  modules: ContainerModule[];
}

/**
 * Imports `stages.<name>.module` and returns the `@Stage` class named `name` in it.
 * @throws StageNotFoundError when the stage is not configured, the module does not load, or it
 * has no stage of that name.
 */
export async function loadStage(config: CompiledConfig, name: string): Promise<LoadedStage> {
  const stageConfig = config.stages.get(name);
  if (!stageConfig) {
    throw new StageNotFoundError(name, `not in ${config.source} (configured: ${[...config.stages.keys()].join(', ') || 'none'})`);
  }
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(stageConfig.module).href)) as Record<string, unknown>;
  } catch (err) {
    throw new StageNotFoundError(name, `module ${stageConfig.module} failed to load: ${(err as Error).message}`);
  }
  const stages = exploreStages(exports);
  const stage = stages.find((candidate) => candidate.metadata.name === name);
  if (!stage) {
    const found = stages.map((s) => s.metadata.name).join(', ') || 'no @Stage class';
    throw new StageNotFoundError(name, `module ${stageConfig.module} exports ${found}`);
  }
  const modules = Object.values(exports).filter((value): value is ContainerModule => value instanceof ContainerModule);
  return { ...stage, modules };
}

/** Loads every configured stage (for `dev`, `provision` and `topology`). */
export async function loadAllStages(config: CompiledConfig): Promise<LoadedStage[]> {
  const loaded: LoadedStage[] = [];
  for (const name of config.stages.keys()) loaded.push(await loadStage(config, name));
  return loaded;
}
