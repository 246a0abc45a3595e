import { StagecoachError } from '../../errors/errors.js';

/**
 * RabbitMQ closes a channel with PRECONDITION_FAILED when one of its deliveries stays
 * unacknowledged past the broker's `consumer_timeout` ("delivery acknowledgement on channel 1
 * timed out. Timeout value used: 1800000 ms ..."): the job is taken back and delivered again.
 * @returns the timeout the broker used, ms (0 when its message does not say), or undefined when
 * `err` is not that close.
 */
export function consumerTimeoutOf(err: Error): number | undefined {
  const message = err.message;
  if (!/delivery acknowledgement on channel \d+ timed out/.test(message)) return undefined;
  const used = /Timeout value used: (\d+) ms/.exec(message);
  return used === null ? 0 : Number(used[1]);
}

/**
 * A job whose attempt ran past the broker's `consumer_timeout`: running it again would meet the
 * same timeout, so it is dead-lettered (never retried) with a reason that says so.
 */
export class ConsumerTimeoutError extends StagecoachError {
  constructor(attempt: number, timeoutMs: number) {
    super(
      'CONSUMER_TIMEOUT',
      `attempt ${attempt} ran past the broker's consumer_timeout${timeoutMs > 0 ? ` (${timeoutMs} ms)` : ''}: the broker closed its channel ` +
        'and took the job back. Raise consumer_timeout on the broker (or, on RabbitMQ 3.12+, let the queue policy set it) for jobs this long',
    );
  }
}
