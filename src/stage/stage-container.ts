import 'reflect-metadata';
import { Container } from 'inversify';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { withExecutionMiddleware } from './middleware/execution-chain.js';
import type { LoadedStage } from './stage-loader.js';
import type { StageHandler } from './stage.types.js';
import { CONFIG, LOGGER, STAGE_OPTIONS, TENANT, VARIANT } from './tokens.js';

/** A stage instance together with the container that built it, for callers that drop instances. */
export interface StageInstance {
  handler: StageHandler;
  /**
   * Unbinds the instance's container, so the deactivation hooks (`@preDestroy`,
   * `onDeactivation`) of the singletons it resolved run: a stage that holds a tenant's
   * resources (a connection, a timer) lets them go when that tenant leaves.
   */
  dispose(): Promise<void>;
}

/**
 * One inversify container per stage instance (stage x tenant x variant): the stage class and
 * whatever it injects are singletons within it, never shared across tenants. `autobind` lets
 * a stage inject its own classes without binding them; `ContainerModule`s exported by the
 * stage module are loaded first. The handler comes wrapped in the stage's own execution
 * middleware (`@Stage({ middleware })`).
 */
export async function createStageInstance(
  stage: LoadedStage,
  config: CompiledConfig,
  tenant: string | undefined,
  log: Logger,
  variant?: string,
): Promise<StageHandler> {
  return (await buildStageInstance(stage, config, tenant, log, variant)).handler;
}

/** {@link createStageInstance}, keeping the container so that the instance can be disposed. */
export async function buildStageInstance(
  stage: LoadedStage,
  config: CompiledConfig,
  tenant: string | undefined,
  log: Logger,
  variant?: string,
): Promise<StageInstance> {
  const container = new Container({ autobind: true, defaultScope: 'Singleton' });
  container.bind(LOGGER).toConstantValue(log);
  container.bind(CONFIG).toConstantValue(config);
  container.bind(STAGE_OPTIONS).toConstantValue(config.stages.get(stage.metadata.name)?.options ?? {});
  container.bind(TENANT).toConstantValue(tenant);
  container.bind(VARIANT).toConstantValue(variant);
  for (const module of stage.modules) await container.load(module);
  container.bind(stage.target).toSelf();
  const instance: StageHandler = await container.getAsync<StageHandler>(stage.target);
  if (typeof instance.handle !== 'function') {
    throw new TypeError(`stage "${stage.metadata.name}" has no handle(job, ctx) method`);
  }
  // The stage's own execution middleware, where its handler runs (a worker thread builds it here too).
  return { handler: withExecutionMiddleware(instance, stage.middleware.execution), dispose: () => container.unbindAllAsync() };
}
