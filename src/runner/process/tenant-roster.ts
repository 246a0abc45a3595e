import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { CompiledConfig } from '../../config/config.types.js';
import type { ControlMessage } from '../../control/control-protocol.js';
import type { Logger } from '../../logging/logger.js';
import type { SampledQueue } from '../../observability/queue-depths.js';
import { StageRunner, type StageRunnerOptions } from '../stage-runner.js';
import type { StageInstance } from './stage-instance.js';

export interface TenantRosterOptions {
  config: CompiledConfig;
  log: Logger;
  /** What a runner of an instance takes from the process (ProcessServices.runnerOptions). */
  runnerOptions(instance: StageInstance): StageRunnerOptions;
  /** A runner that cannot recover: the process fails (`run` exits 1 for the orchestrator to restart it). */
  onFatal(err: Error): void;
  /** @defaultValue a new StageRunner (a unit test passes a stub) */
  createRunner?: (options: StageRunnerOptions) => StageRunner;
}

/**
 * The runners of a process and who they serve: built, prepared, attached and detached together,
 * one added or removed at a time. This one is the fixed set of `run --tenant T` and `dev`, each
 * runner on channels of its own; a {@link PooledRoster} is the one whose tenants share a pool
 * and may come and go while it runs. The group holds one or the other and asks no more.
 *
 * Lifecycle: `admit()` the instances; `prepare()` (no broker); `attach()` on every connection,
 * `detach()` when it is lost; `freeze()` when the group stops (nothing is added from then on);
 * every runner stops; `close()`.
 */
export class TenantRoster {
  /** In the order they were admitted (StageGroup.runners). */
  readonly runners: StageRunner[] = [];
  /** True from `freeze()` on: the group is stopping. */
  protected frozen = false;

  constructor(protected readonly options: TenantRosterOptions) {}

  /** Tenants served now (a shared stage's runner has none). */
  get tenants(): string[] {
    return this.runners.map((runner) => runner.tenant).filter((tenant): tenant is string => tenant !== undefined);
  }

  /** Every runner's input queue, as the queue-depth metrics name it. */
  get queues(): SampledQueue[] {
    return this.runners.map((runner) => ({
      stage: runner.stageName,
      queue: runner.inputQueue,
      tenant: runner.tenant ?? '',
      physicalQueue: runner.queue,
    }));
  }

  /** The runners a control message addresses. */
  matching(message: ControlMessage): StageRunner[] {
    return this.runners.filter((runner) => runner.matches(message));
  }

  /** Builds the runner of `instance` and counts it in; it is prepared and attached with the others. */
  admit(instance: StageInstance): StageRunner {
    const create = this.options.createRunner ?? ((options: StageRunnerOptions) => new StageRunner(options));
    const runner = create(this.runnerOptions(instance));
    runner.on('fatal', (err: Error) => this.onRunnerFatal(runner, err));
    this.runners.push(runner);
    return runner;
  }

  /** Builds every stage before the broker is reached: a module that does not load fails now. */
  async prepare(): Promise<void> {
    for (const runner of this.runners) await runner.prepare();
  }

  /** Every runner on `connection`, one after the other (at start and after each reconnection). */
  async attach(connection: AmqpConnection): Promise<void> {
    for (const runner of this.runners) await runner.attach(connection);
  }

  /** After the rest of the process attached on `connection`: what follows the broker's tenants listens (pooled). */
  follow(_connection: AmqpConnection): Promise<void> {
    return Promise.resolve(); // a fixed set follows nothing
  }

  /** The connection is gone: every runner forgets its channels. */
  detach(): void {
    for (const runner of this.runners) runner.detach();
  }

  /** Only a pooled roster takes tenants while it runs. */
  addTenant(_tenant: string): Promise<boolean> {
    return Promise.reject(new Error('addTenant: not a pooled group'));
  }

  /**
   * Stops serving `tenant` (retired): its runner drains within the grace period and leaves.
   * @returns false when it was not served.
   */
  async removeTenant(tenant: string): Promise<boolean> {
    const runner = this.runners.find((r) => r.tenant === tenant);
    if (runner === undefined) return false;
    this.runners.splice(this.runners.indexOf(runner), 1);
    await runner.stop(this.options.config.gracePeriod * 1000);
    await this.release(runner);
    // Its counters stay until the process restarts, as a Prometheus counter should.
    this.options.log.info('tenant removed', { tenant, tenants: this.runners.length });
    return true;
  }

  /**
   * A `terminate` control message for `matching`: they stop within the grace period.
   * @returns true when every runner of the process is stopping (the process has nothing left to do).
   */
  async terminate(matching: readonly StageRunner[], _tenant: string | undefined): Promise<boolean> {
    await Promise.all(matching.map((r) => r.stop(this.options.config.gracePeriod * 1000)));
    return this.runners.every((r) => r.stopping);
  }

  /** The group is stopping: nothing is added from now on. */
  freeze(): Promise<void> {
    this.frozen = true;
    return Promise.resolve();
  }

  /** After every runner stopped: what they shared (pooled). */
  close(): Promise<void> {
    return Promise.resolve(); // each runner closed its own channels when it stopped
  }

  protected runnerOptions(instance: StageInstance): StageRunnerOptions {
    return this.options.runnerOptions(instance);
  }

  /** What a removed runner held of the process's resources goes back (pooled). */
  protected release(_runner: StageRunner): Promise<void> {
    return Promise.resolve(); // nothing shared
  }

  protected onRunnerFatal(_runner: StageRunner, err: Error): void {
    this.options.onFatal(err);
  }
}
