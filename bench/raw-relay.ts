import type { Channel, ChannelModel, ConfirmChannel, ConsumeMessage, Options } from 'amqplib';
import { brokerCpuNow } from './broker-cpu.js';
import { cpuNow, rawJob, rawOptions, rawTraceparent } from './common.js';

/** What a relay publishes for one input. */
export interface Outgoing {
  exchange: string;
  routingKey: string;
  content: Buffer;
  options: Options.Publish;
}

/**
 * The output of the `relay` and `pipeline` baselines: the same OJS envelope and headers
 * stagecoach writes, through the tenant root exchange to `outputQueue` (a logical queue).
 */
export function ojsOutput(exchange: string, outputQueue: string): (message: ConsumeMessage) => Outgoing {
  return (message) => {
    const job = JSON.parse(message.content.toString('utf8')) as { id: string; type: string; args: unknown[] };
    const output = rawJob(outputQueue, job.type, job.args, job.id);
    const options = rawOptions(output, rawTraceparent(message.properties.headers?.['x-ojs-traceparent']));
    return { exchange, routingKey: outputQueue, content: Buffer.from(JSON.stringify(output)), options };
  };
}

/**
 * The hand-written baseline: a relay in plain amqplib, written the way that made it fast in
 * the reference measurements:
 * - consume and publish on separate channels; prefetch as configured;
 * - one long-lived confirm channel with many confirms outstanding, tracked by callbacks;
 * - the body parsed once; the output is what `output` makes of the input (`ojsOutput`: the
 *   envelope and headers stagecoach writes; bench/peers.ts: the smallest message a worker needs);
 * - the input acknowledged only after its output is confirmed, in batches with `allUpTo`:
 *   outputs are published in delivery order on one channel, so confirms arrive in that order
 *   and the latest confirmed delivery acknowledges every one before it;
 * - channels closed before the connection (closing the connection right after acking loses acks).
 */
export class RawRelay {
  /** performance.now() of the first delivery. */
  first = 0;
  /** Process CPU time (µs) at the first delivery. */
  firstCpu = 0;
  firstBroker: number | undefined;
  /** Inputs acknowledged (their output confirmed). */
  acked = 0;
  readonly failed: Promise<Error>;
  private fail!: (err: Error) => void;
  private consumeChannel: Channel | undefined;
  private confirmChannel: ConfirmChannel | undefined;
  private consumerTag: string | undefined;
  private lastConfirmed: ConsumeMessage | undefined;
  private unackedConfirmed = 0;
  private flushScheduled = false;
  private stopping = false;

  constructor(
    private readonly connection: ChannelModel,
    private readonly inputQueue: string,
    private readonly output: (message: ConsumeMessage) => Outgoing,
    private readonly prefetch: number,
  ) {
    this.failed = new Promise<Error>((resolve) => (this.fail = resolve));
  }

  async start(): Promise<void> {
    this.confirmChannel = await this.connection.createConfirmChannel();
    this.consumeChannel = await this.connection.createChannel();
    for (const channel of [this.confirmChannel, this.consumeChannel]) {
      channel.on('error', (err: Error) => this.fail(err));
      channel.on('close', () => {
        if (!this.stopping) this.fail(new Error('channel closed'));
      });
    }
    await this.consumeChannel.prefetch(this.prefetch);
    const { consumerTag } = await this.consumeChannel.consume(this.inputQueue, (message) => this.onMessage(message), { noAck: false });
    this.consumerTag = consumerTag;
  }

  private onMessage(message: ConsumeMessage | null): void {
    if (message === null) return this.fail(new Error(`consumer of ${this.inputQueue} cancelled by the broker`));
    if (this.first === 0) {
      this.first = performance.now();
      this.firstCpu = cpuNow();
      this.firstBroker = brokerCpuNow();
    }
    const out = this.output(message);
    (this.confirmChannel as ConfirmChannel).publish(out.exchange, out.routingKey, out.content, out.options, (err: unknown) => {
      if (err) return this.fail(new Error(`broker nacked an output of ${this.inputQueue}`));
      this.lastConfirmed = message;
      this.unackedConfirmed++;
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Acknowledges every input up to the latest confirmed one. */
  private flush(): void {
    this.flushScheduled = false;
    if (this.lastConfirmed === undefined) return;
    (this.consumeChannel as Channel).ack(this.lastConfirmed, true);
    this.acked += this.unackedConfirmed;
    this.unackedConfirmed = 0;
    this.lastConfirmed = undefined;
  }

  /** Stops consuming, waits for outstanding confirms, acks, closes its channels (not the connection). */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.consumerTag) await this.consumeChannel?.cancel(this.consumerTag).catch(() => undefined);
    await this.confirmChannel?.waitForConfirms().catch(() => undefined);
    this.flush();
    await this.consumeChannel?.close().catch(() => undefined);
    await this.confirmChannel?.close().catch(() => undefined);
  }
}
