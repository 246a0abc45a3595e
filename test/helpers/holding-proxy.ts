import net from 'node:net';

/**
 * A TCP proxy in front of the broker, for faults the broker cannot make by itself: `hold()`
 * stops passing what the broker sends to the clients (the broker goes on sending: deliveries
 * pile up here and never arrive), `cut()` then destroys both sides of every connection, as a
 * network failure would. New connections pass as before.
 */
export class HoldingProxy {
  private readonly pairs = new Set<{ client: net.Socket; broker: net.Socket; held: boolean }>();
  private holding = false;
  /** Bytes the broker sent that `hold()` kept from the clients. */
  held = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<HoldingProxy> {
    const accepted: { proxy?: HoldingProxy } = {};
    const server = net.createServer((client) => accepted.proxy?.accept(client, target));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    accepted.proxy = new HoldingProxy(server, (server.address() as net.AddressInfo).port);
    return accepted.proxy;
  }

  /** The broker's bytes stop reaching the clients of the connections open now. */
  hold(): void {
    this.holding = true;
    for (const pair of this.pairs) pair.held = true;
  }

  /** Destroys every connection open now, both sides; later ones pass again. */
  cut(): void {
    this.holding = false;
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.broker.destroy();
    }
    this.pairs.clear();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket, target: { host: string; port: number }): void {
    const broker = net.connect(target.port, target.host);
    const pair = { client, broker, held: this.holding };
    this.pairs.add(pair);
    client.on('data', (chunk) => broker.write(chunk));
    broker.on('data', (chunk) => {
      if (!pair.held) client.write(chunk);
      else this.held += chunk.length;
    });
    const end = (): void => {
      this.pairs.delete(pair);
      client.destroy();
      broker.destroy();
    };
    client.on('error', end).on('close', end);
    broker.on('error', end).on('close', end);
  }
}
