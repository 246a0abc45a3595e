import 'reflect-metadata';
import { Container } from 'inversify';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { LoadedStage } from './stage-loader.js';
import type { StageHandler } from './stage.types.js';
import { CONFIG, LOGGER, STAGE_OPTIONS, TENANT, VARIANT } from './tokens.js';

/**
 * One inversify container per stage instance (stage x tenant x variant): the stage class and
 * whatever it injects are singletons within it, never shared across tenants. `autobind` lets
 * a stage inject its own classes without binding them; `ContainerModule`s exported by the
 * stage module are loaded first.
 */
export async function createStageInstance(
  stage: LoadedStage,
  config: CompiledConfig,
  tenant: string | undefined,
  log: Logger,
  variant?: string,
): Promise<StageHandler> {
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
  return instance;
}
