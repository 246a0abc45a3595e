import net from 'node:net';
import type { ChannelModel } from 'amqplib';
import { expect } from 'chai';
import { coalesceWrites } from '../../src/broker/coalesced-writes.js';

describe('coalesced socket writes', () => {
  let server: net.Server;
  let received: Buffer[];
  let socket: net.Socket;

  beforeEach(async () => {
    received = [];
    server = net.createServer((peer) => peer.on('data', (chunk: Buffer) => received.push(chunk)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
  });

  /** Waits, bounded, until the server got `bytes`. */
  async function receivedBytes(bytes: number): Promise<void> {
    const deadline = Date.now() + 5000;
    while (Buffer.concat(received).length < bytes && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  afterEach(async () => {
    socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('hands the frames written in one turn to the kernel in one writev, in order, and the next turn again', async () => {
    const calls = systemCalls(socket);
    coalesceWrites({ connection: { stream: socket } } as unknown as ChannelModel);
    for (const part of ['one ', 'two ', 'three ']) socket.write(Buffer.from(part));
    await new Promise((resolve) => setImmediate(resolve));
    socket.write(Buffer.from('four'));
    await receivedBytes(18);
    expect(Buffer.concat(received).toString()).to.equal('one two three four');
    expect(calls).to.deep.equal([3, 1]);
  });

  it('with flush "turn", hands the frames of every callback of a turn to the kernel in one writev', async () => {
    const calls = systemCalls(socket);
    coalesceWrites({ connection: { stream: socket } } as unknown as ChannelModel, 'turn');
    // Two timers due together run in one turn, each its own callback (as two HTTP requests read at once).
    await new Promise<void>((resolve) => {
      setTimeout(() => socket.write(Buffer.from('one ')), 0);
      setTimeout(() => {
        socket.write(Buffer.from('two'));
        resolve();
      }, 0);
    });
    await receivedBytes(7);
    expect(Buffer.concat(received).toString()).to.equal('one two');
    expect(calls).to.deep.equal([2]);
  });

  it('leaves a connection without a socket as it is', () => {
    expect(() => coalesceWrites({ connection: {} } as unknown as ChannelModel)).not.to.throw();
  });
});

/** The chunks of each system call the socket makes (a `write` is one). */
function systemCalls(socket: net.Socket): number[] {
  const calls: number[] = [];
  const spied = socket as unknown as { _writev: (chunks: unknown[], cb: () => void) => void; _write: (...args: unknown[]) => void };
  const writev = spied._writev.bind(socket);
  const write = spied._write.bind(socket);
  spied._writev = (chunks, cb) => {
    calls.push(chunks.length);
    writev(chunks, cb);
  };
  spied._write = (...args) => {
    calls.push(1);
    write(...args);
  };
  return calls;
}
