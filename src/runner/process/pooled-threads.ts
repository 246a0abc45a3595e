import type { CompiledConfig } from '../../config/config.types.js';
import type { Logger } from '../../logging/logger.js';
import type { LoadedStage } from '../../stage/stage-loader.js';
import { createPooledThreadedHandler, type PooledThreadedHandler } from '../../stage/threads/threaded-handler.js';

/**
 * A pooled process's worker threads, shared by every tenant (each thread builds a tenant's stage
 * instance at its first job of that tenant); undefined when the stage runs on the main thread.
 * Rejects before any job when a thread cannot load the stage module.
 */
export async function pooledThreads(
  config: CompiledConfig,
  stage: LoadedStage,
  variant: string | undefined,
  log: Logger,
): Promise<PooledThreadedHandler | undefined> {
  const threads = config.stages.get(stage.metadata.name)?.threads;
  if (threads === undefined) return undefined;
  return createPooledThreadedHandler({ stage, config, variant, threads, log });
}
