import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { Logger } from '../logging/logger.js';
import type { ChannelHealth, ConsumeDecision } from './intake/consume-decision.js';
import type { Delivery, InputKind } from './channels/delivery.js';
import { isRedelivery } from './handling/delivery-processor.js';
import { Dispatcher, type DispatcherOptions } from './intake/dispatcher.js';
import type { RunnerResources } from './runner-resources.js';
import { SuspectWatch } from './intake/suspect-watch.js';
import { WorkConsumers } from './intake/work-consumers.js';
import type { ConsumerSource } from './channels/consumer-source.js';

export interface WorkIntakeOptions {
  /** The physical queues: `main` and `due` consumed, `suspect` watched. */
  queues: Record<InputKind, string>;
  resources: RunnerResources;
  /** Asked by every consume decision here. */
  decision: ConsumeDecision;
  log: Logger;
  /** A channel that cannot be healed fails the runner. */
  onFatal(err: Error): void;
  /** Processes and settles one delivery; never rejects. `handled`: see DispatcherOptions.process. */
  process(delivery: Delivery, handled?: () => void): Promise<void>;
  /** Hands an unstarted delivery back to the broker, unflagged; never rejects. */
  handBack(delivery: Delivery): Promise<unknown>;
  /** Flow control (see DispatcherOptions.admit and .limited; flow-intake.ts). */
  admit?: DispatcherOptions['admit'];
  limited?: DispatcherOptions['limited'];
}

/**
 * Where a runner's deliveries come from, and when: its {@link WorkConsumers} (`main` and `due`),
 * its {@link SuspectWatch} and its {@link Dispatcher}, kept in line with the runner's
 * {@link ConsumeDecision}. Every change of that decision comes through here: `stopTaking()` for
 * a "no", `resume()` and `unsuspend()` for a "yes" again.
 *
 * Lifecycle: follows its runner's. `open()` once the stage is built, `attach()` at every
 * connection, `detach()` when it is gone, `close()` once at stop.
 */
export class WorkIntake {
  readonly work: WorkConsumers;
  readonly suspects: SuspectWatch;
  readonly dispatcher: Dispatcher;

  constructor(private readonly options: WorkIntakeOptions) {
    const { queues, resources, decision, log, onFatal } = options;
    const lost = (ids: string[], unseen?: ReadonlyMap<string, number>, timedOut?: ConsumerSource['timedOut']): void =>
      resources.ledger.record(ids, unseen, timedOut);
    const arrived = (queue: string, message: Delivery['message']): void =>
      resources.ledger.arrived(queue, message.properties.messageId, isRedelivery({ message }));
    const declare = (connection: AmqpConnection): Promise<void> => resources.declare(connection);
    this.work = new WorkConsumers({
      ...resources.work,
      queues: { main: queues.main, due: queues.due },
      declare,
      log,
      wanted: () => decision.consume,
      offer: (delivery) => this.dispatcher.offer(delivery),
      // Its waiting deliveries are the broker's again: running them would only make duplicates.
      abandon: (source) => this.dispatcher.abandonWaiting((delivery) => delivery.source === source),
      onFatal,
      lost,
      arrived,
    });
    this.suspects = new SuspectWatch({
      ...resources.suspects,
      queue: queues.suspect,
      declare,
      log,
      gate: resources.gate,
      running: () => decision.takeSuspects,
      runAlone: (delivery) => this.dispatcher.runAlone(delivery),
      onFatal,
      lost,
      arrived,
    });
    this.dispatcher = new Dispatcher({
      ...resources.slots,
      ...(options.admit === undefined ? {} : { admit: options.admit }),
      ...(options.limited === undefined ? {} : { limited: options.limited }),
      process: (delivery, handled) => options.process(delivery, handled),
      // A redelivered delivery carries a crash: handed back unflagged, it would lose it and could
      // run in the pool as a first delivery. It is settled as the crash it is instead (moved to
      // the suspect queue, unjudged); its handler does not run.
      handBack: (delivery) =>
        isRedelivery(delivery) && !resources.ledger.forgive(delivery.message.properties.messageId)
          ? options.process(delivery)
          : options.handBack(delivery),
    });
  }

  /** Its channels as `ConsumeDecision.healthy` needs them (the publisher is the resources'). */
  get channels(): ChannelHealth {
    return {
      open: this.options.resources.publishers.current !== undefined && this.suspects.open && this.work.open,
      consuming: this.work.consuming,
    };
  }

  /** The stage is built: deliveries may start. */
  open(): void {
    this.dispatcher.openUp();
  }

  /** Suspects first, then the consumers: they start as the decision says. */
  async attach(connection: AmqpConnection): Promise<void> {
    await this.suspects.attach(connection);
    await this.work.attach(connection);
  }

  detach(): void {
    this.work.detach();
    this.suspects.detach();
  }

  async close(): Promise<void> {
    await this.suspects.close();
    await this.work.close();
  }

  /**
   * The decision turned to "no" (pause, quiet, stop, a suspension): consumers off first, then
   * what was prefetched goes back: it cannot come back to us. Jobs in flight go on.
   */
  async stopTaking(): Promise<void> {
    this.dispatcher.hold();
    await this.work.sync();
    await this.dispatcher.close();
  }

  /** Running again: consumes unless suspended, and looks for suspects at once. */
  async resume(): Promise<void> {
    if (this.options.decision.consume) this.dispatcher.openUp();
    await this.work.sync();
    this.suspects.mayWait(0);
  }

  /**
   * The gate isolates a suspect: nothing stays in hand, and what was settled is sent. This
   * runner's own suspects, if any, are looked for at once, to take their turn in the same window
   * (see IsolationGate) rather than open one of their own later.
   */
  async suspend(): Promise<void> {
    this.options.decision.suspend();
    this.suspects.mayWait(0);
    await this.stopTaking();
    await this.dispatcher.whenIdle();
    // Nothing in hand means nothing the broker does not know is settled.
    await this.work.settled();
  }

  /** The isolation ended: consumes again if the decision says so now. */
  unsuspend(): void {
    if (!this.options.decision.unsuspend()) return;
    this.dispatcher.openUp();
    void this.work.sync();
  }
}
