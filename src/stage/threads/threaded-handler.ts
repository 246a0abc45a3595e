import type { CompiledConfig } from '../../config/config.types.js';
import type { Logger } from '../../logging/logger.js';
import type { LoadedStage } from '../stage-loader.js';
import type { StageHandler } from '../stage.types.js';

export interface ThreadedHandlerOptions {
  stage: LoadedStage;
  config: CompiledConfig;
  tenant: string | undefined;
  variant: string | undefined;
  threads: number;
  log: Logger;
}

export interface ThreadedHandler extends StageHandler {
  /** Ends the worker threads (after the jobs they run have settled). */
  close(): Promise<void>;
}

/** Placeholder: implemented in the worker-thread pool change. */
export async function createThreadedHandler(_options: ThreadedHandlerOptions): Promise<ThreadedHandler> {
  throw new Error('worker threads are not implemented yet');
}
