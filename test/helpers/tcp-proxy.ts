import net from 'node:net';

/**
 * A TCP proxy to the broker that can black-hole its connections: `blackHole()` stops forwarding
 * in both directions while every socket stays open (no FIN, no RST), as a network path that
 * silently drops packets would. Each side's data is then read and thrown away.
 */
export class TcpProxy {
  private blackHoled = false;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const proxy = new TcpProxy(server, (server.address() as net.AddressInfo).port);
    server.on('connection', (client: net.Socket) => proxy.join(client, target));
    return proxy;
  }

  /** From now on nothing passes, either way; nothing is closed either. */
  blackHole(): void {
    this.blackHoled = true;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private join(client: net.Socket, target: { host: string; port: number }): void {
    const upstream = net.connect(target.port, target.host);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(from);
      from.on('data', (chunk: Buffer) => {
        if (!this.blackHoled) to.write(chunk);
      });
      from.on('error', () => undefined);
      from.on('close', () => {
        this.sockets.delete(from);
        if (!this.blackHoled) to.destroy();
      });
    }
  }
}
