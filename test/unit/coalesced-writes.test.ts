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

  afterEach(async () => {
    socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('hands the frames written in one turn to the kernel in one writev, in order, and the next turn again', async () => {
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
    coalesceWrites({ connection: { stream: socket } } as unknown as ChannelModel);
    for (const part of ['one ', 'two ', 'three ']) socket.write(Buffer.from(part));
    await new Promise((resolve) => setImmediate(resolve));
    socket.write(Buffer.from('four'));
    const deadline = Date.now() + 5000;
    while (Buffer.concat(received).length < 18 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(Buffer.concat(received).toString()).to.equal('one two three four');
    expect(calls).to.deep.equal([3, 1]);
  });

  it('leaves a connection without a socket as it is', () => {
    expect(() => coalesceWrites({ connection: {} } as unknown as ChannelModel)).not.to.throw();
  });
});
