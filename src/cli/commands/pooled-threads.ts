import type { CompiledConfig } from '../../config/config.types.js';
import { StagecoachError } from '../../errors/errors.js';
import type { Logger } from '../../logging/logger.js';
import type { LoadedStage } from '../../stage/stage-loader.js';
import type { ThreadedHandler } from '../../stage/threads/threaded-handler.js';

/** A pooled process's worker threads, shared by every tenant; undefined when the stage runs on the main thread. */
export function pooledThreads(config: CompiledConfig, stage: LoadedStage, _log: Logger): Promise<ThreadedHandler | undefined> {
  const threads = config.stages.get(stage.metadata.name)?.threads;
  if (threads === undefined) return Promise.resolve(undefined);
  return Promise.reject(new StagecoachError('INVALID_REQUEST', `stage "${stage.metadata.name}" has threads: not yet served pooled`));
}
