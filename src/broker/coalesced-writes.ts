import type { Socket } from 'node:net';
import type { ChannelModel } from 'amqplib';

/**
 * Gathers what amqplib writes to a connection's socket within one turn of the event loop into
 * one system call. amqplib writes every frame group (a publish, an ack, a channel's credit) with
 * its own `socket.write()`, and each is a `write` system call of its own: on a busy relay, more
 * CPU than all of stagecoach's own code per job (docs/performance.md). Corked on the first write
 * of a turn and uncorked at the next tick, the socket hands the kernel the turn's frames in one
 * `writev`, a few microseconds later. Backpressure is unchanged: a corked socket's `write()`
 * still returns false past its high-water mark, and amqplib waits for `drain`, which follows
 * the uncork. Nothing is reordered: the frames leave in the order they were written.
 *
 * `flush` says when the gathered frames leave. `tick` (the default): after the callback that
 * wrote them, which for a consumer is a socket read carrying many deliveries. `turn`: after every
 * callback of the event loop's turn (setImmediate), for a connection written from many callbacks
 * at once, as the HTTP binding's is (each worker's request is a callback of its own): a turn's
 * requests leave in one `writev`. A consumer's connection stays on `tick`: waiting for the
 * turn's end delays its confirms and acks behind other I/O (a 3-hop pipeline ran at two thirds).
 */
export type WriteFlush = 'tick' | 'turn';

export function coalesceWrites(connection: ChannelModel, flush: WriteFlush = 'tick'): void {
  const socket = socketOf(connection);
  if (socket === undefined) return;
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    socket.uncork();
  };
  socket.write = ((...args: unknown[]): boolean => {
    if (!corked && !socket.destroyed) {
      corked = true;
      socket.cork();
      if (flush === 'tick') process.nextTick(uncork);
      else setImmediate(uncork);
    }
    return write(...args);
  }) as Socket['write'];
}

/** amqplib's socket under a connection (not part of its typed API), when it is one. */
function socketOf(connection: ChannelModel): Socket | undefined {
  const stream = (connection as unknown as { connection?: { stream?: unknown } }).connection?.stream;
  if (stream === null || typeof stream !== 'object') return undefined;
  const socket = stream as Partial<Socket>;
  return typeof socket.cork === 'function' && typeof socket.uncork === 'function' && typeof socket.write === 'function'
    ? (socket as Socket)
    : undefined;
}
