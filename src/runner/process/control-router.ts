import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { isOpen } from '../../broker/connection-state.js';
import type { CompiledConfig } from '../../config/config.types.js';
import { ControlListener } from '../../control/control-listener.js';
import type { ControlMessage } from '../../control/control-protocol.js';
import type { Logger } from '../../logging/logger.js';
import type { DirectiveGate } from '../handling/directive-gate.js';
import type { StageRunner } from '../stage-runner.js';

/** What the router asks of the runners' roster (TenantRoster). */
export interface ControlTargets {
  readonly runners: readonly StageRunner[];
  matching(message: ControlMessage): StageRunner[];
  /** @returns true when every runner of the process is stopping. */
  terminate(matching: readonly StageRunner[], tenant: string | undefined): Promise<boolean>;
}

export interface ControlRouterOptions {
  config: CompiledConfig;
  log: Logger;
  targets: ControlTargets;
  directives: Pick<DirectiveGate, 'forget' | 'forgetAll'>;
  /** The process's connection, as it is now. */
  connection(): AmqpConnection | undefined;
  /** A `terminate` stopped every runner of the process: it has nothing left to do. */
  onTerminated(): void;
  /** `limits`: the flow limits of the configuration file changed, or partitions are held (docs/flow-control.md). */
  onLimits?(message: ControlMessage): Promise<void>;
  /** `excuse`: deliveries another process lost while it lives (LossLedger.excuse). */
  onExcuse?(ids: readonly string[]): void;
  /** `timed-out`: jobs the broker's consumer_timeout took from another process (LossLedger.recordTimedOut). */
  onTimedOut?(ids: readonly string[], timeoutMs: number): void;
  /** @defaultValue a ControlListener on `<prefix>.control` (a unit test routes messages itself) */
  listener?: Pick<ControlListener, 'attach' | 'close'>;
}

/**
 * Control messages (`stagecoach pause|resume|drain|quiet|terminate`, and directive changes) to
 * the runners they address. Queue states and directives live on the broker: a message only
 * says "read them again", so a late or repeated one changes nothing. Worker states (`quiet`,
 * `terminate`) live in the process and are applied as they come.
 *
 * Lifecycle: `attach()` on every connection (the listener's private queue goes with the
 * connection); `close()` first when the group stops, so that no message reaches a stopping runner.
 */
export class ControlRouter {
  private readonly listener: Pick<ControlListener, 'attach' | 'close'>;

  constructor(private readonly options: ControlRouterOptions) {
    this.listener =
      options.listener ??
      new ControlListener(
        options.config,
        options.log,
        (message) => this.route(message),
        () => this.reattached(),
      );
  }

  attach(connection: AmqpConnection): Promise<void> {
    return this.listener.attach(connection);
  }

  close(): Promise<void> {
    return this.listener.close();
  }

  async route(message: ControlMessage): Promise<void> {
    const { targets } = this.options;
    const matching = targets.matching(message);
    switch (message.command) {
      case 'pause':
      case 'drain':
      case 'resume':
        // Queue states live on the broker (setQueueState wrote them before sending this): read
        // them rather than trust the message, so a late or repeated message changes nothing.
        await this.syncStates(matching);
        break;
      case 'quiet':
        await Promise.all(matching.map((r) => r.quiet()));
        break;
      case 'directive':
        // The markers on the broker are the truth (batch-directives.ts set them before sending this).
        this.options.directives.forget({
          ...(message.batch === undefined ? {} : { batch: message.batch }),
          ...(message.tenant === undefined ? {} : { tenant: message.tenant }),
        });
        break;
      case 'terminate':
        if (await targets.terminate(matching, message.tenant)) this.options.onTerminated();
        break;
      case 'limits':
        await this.options.onLimits?.(message);
        break;
      case 'excuse':
        this.options.onExcuse?.(message.ids ?? []);
        break;
      case 'timed-out':
        this.options.onTimedOut?.(message.ids ?? [], message.timeout_ms ?? 0);
        break;
    }
  }

  /** The listener came back on its own (its channel closed on a live connection): what was missed meanwhile is read again. */
  private reattached(): Promise<void> {
    // Directive messages may have been missed too: markers are read again when next needed.
    this.options.directives.forgetAll();
    return this.syncStates(this.options.targets.runners);
  }

  /** Every given runner reads its queue's state again, on the current connection. */
  private async syncStates(runners: readonly StageRunner[]): Promise<void> {
    const connection = this.options.connection();
    if (connection === undefined || !isOpen(connection)) return; // the next attach reads them
    await Promise.all(runners.filter((r) => !r.stopping).map((r) => r.syncState(connection)));
  }
}
