import 'reflect-metadata';
import { injectable } from 'inversify';
import { STAGE_METADATA, STAGE_MIDDLEWARE_METADATA } from './metadata-keys.js';
import { middlewareLists } from './middleware/middleware-lists.js';
import type { Middleware } from './middleware/middleware.types.js';
import type { StageMetadata } from './stage.types.js';
import { isQueueName, QUEUE_NAME_RULE } from '../util/queue-name.js';

/** What `@Stage()` takes: the metadata, `outputs` optional, and the stage's own middleware. */
export type StageOptions = Omit<StageMetadata, 'outputs'> & {
  outputs?: readonly string[];
  /**
   * The stage's own middleware (docs/middleware.md): `execution` wraps its handler, inside any
   * process-wide middleware of the stage group; `enqueue` runs on each job it emits, after the
   * group's. Recorded apart from the metadata above, which stays plain data. @defaultValue none
   */
  middleware?: Middleware;
};

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_-]{0,62}$/;

/**
 * Marks a class as a stage: it reads `input` and may emit to `outputs`. The decorator only
 * records metadata; `exploreStages()` reads it when a module is loaded. In plain JavaScript,
 * apply it as a function: `Stage({ name, input, outputs })(MyStage)`.
 */
export function Stage(options: StageOptions): ClassDecorator {
  const metadata: StageMetadata = {
    name: options.name,
    input: options.input,
    outputs: [...(options.outputs ?? [])],
    ...(options.types === undefined ? {} : { types: [...options.types] }),
  };
  if (!NAME.test(metadata.name)) throw new TypeError(`@Stage: name "${metadata.name}" must match ${NAME}`);
  for (const queue of [metadata.input, ...metadata.outputs]) {
    if (!isQueueName(queue)) {
      throw new TypeError(`@Stage "${metadata.name}": "${String(queue)}" is not a queue name (${QUEUE_NAME_RULE})`);
    }
  }
  const middleware = middlewareLists(`@Stage "${metadata.name}"`, options.middleware);
  return (target) => {
    Reflect.defineMetadata(STAGE_METADATA, metadata, target);
    if (middleware.enqueue.length > 0 || middleware.execution.length > 0)
      Reflect.defineMetadata(STAGE_MIDDLEWARE_METADATA, middleware, target);
    // Let inversify read the constructor's parameter types (emitDecoratorMetadata), so that
    // a stage injects its services by class without a separate @injectable().
    if (!isInjectable(target)) injectable()(target);
    return target;
  };
}

/** inversify records its class metadata under this key once `@injectable()` ran. */
const INVERSIFY_CLASS_IS_INJECTABLE = '@inversifyjs/core/classIsInjectableFlagReflectKey';

function isInjectable(target: object): boolean {
  return Reflect.hasOwnMetadata(INVERSIFY_CLASS_IS_INJECTABLE, target);
}
