import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import type { Logger } from '../logging/logger.js';
import { provisionTopology } from '../topology/build-topology.js';
import type { LoadedStage } from './stage-loader.js';
import { StageRunner } from './stage-runner.js';

export interface StageInstance {
  stage: LoadedStage;
  tenant?: string;
  variant?: string;
}

/**
 * Every instance `dev` runs: a shared stage once; a tenant-scoped one per tenant, plus one per
 * variant queue of its input.
 */
export function devInstances(config: CompiledConfig, stages: readonly LoadedStage[]): StageInstance[] {
  const instances: StageInstance[] = [];
  for (const stage of stages) {
    const input = queueFor(config, stage.metadata.input);
    if (input.scope === 'shared') {
      instances.push({ stage });
      continue;
    }
    for (const tenant of config.tenants) {
      instances.push({ stage, tenant });
      for (const variant of Object.keys(input.variants?.values ?? {})) instances.push({ stage, tenant, variant });
    }
  }
  return instances;
}

/**
 * Stage runners sharing one connection: `run` has one, `dev` many. Lifecycle: `start()`
 * opens the connection and starts every runner; `stop()` drains them all, then closes the
 * connection (channels first, so no acknowledgement is lost). `failed` resolves with the first
 * runner error or connection loss.
 */
export class StageGroup {
  readonly runners: StageRunner[] = [];
  readonly failed: Promise<Error>;
  private connection: AmqpConnection | undefined;
  private fail!: (err: Error) => void;
  private stopping = false;

  constructor(
    private readonly config: CompiledConfig,
    private readonly instances: readonly StageInstance[],
    private readonly log: Logger,
  ) {
    this.failed = new Promise<Error>((resolve) => (this.fail = resolve));
  }

  /** @param provision declare every queue of every configured tenant first (what `dev` does). */
  async start(provision = false): Promise<void> {
    if (provision) {
      await declareTopology(this.config, provisionTopology(this.config, this.instances.map((i) => i.stage.metadata)), this.log);
    }
    const connection = await openConnection(this.config, this.log, `stagecoach ${this.instances.map((i) => i.stage.metadata.name).join(',')}`);
    this.connection = connection;
    connection.on('close', () => {
      if (!this.stopping) this.fail(new Error('broker connection closed'));
    });
    for (const instance of this.instances) {
      const runner = new StageRunner({
        config: this.config,
        stage: instance.stage,
        connection,
        log: this.log.child({ stage: instance.stage.metadata.name, tenant: instance.tenant, variant: instance.variant }),
        ...(instance.tenant === undefined ? {} : { tenant: instance.tenant }),
        ...(instance.variant === undefined ? {} : { variant: instance.variant }),
      });
      runner.on('error', (err: Error) => this.fail(err));
      this.runners.push(runner);
      await runner.start();
    }
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    await Promise.all(this.runners.map((runner) => runner.stop()));
    await this.connection?.close().catch(() => undefined);
  }
}
