import { StagecoachError } from '../errors/errors.js';

/** A dashboard API request whose parameters are wrong (answered 400 with an OJS error object). */
export class DashboardRequestError extends StagecoachError {
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super('INVALID_REQUEST', `${parameter}: ${message}`);
  }
}

/** A message asked for by reference that is no longer where it was listed (retried, purged, replayed meanwhile): 404. */
export class MessageNotFoundError extends StagecoachError {
  constructor(
    readonly queue: string,
    readonly ref: string,
  ) {
    super('NOT_FOUND', `no message "${ref}" in ${queue} now (it may have been retried, replayed or purged since it was listed)`);
  }
}

/** A queue the request needs is not on the broker (a tenant configured but never provisioned): 404. */
export class QueueMissingError extends StagecoachError {
  constructor(
    readonly queue: string,
    options?: { cause?: unknown },
  ) {
    super('NOT_FOUND', `queue ${queue} is not on the broker (is its tenant provisioned?)`, options);
  }
}

/**
 * The queue a broker refusal names when it is a 404 (a passive declare of a missing queue), or
 * undefined for any other error. amqplib reports it as an error with `code` 404 and the broker's
 * text, `NOT_FOUND - no queue '<name>' in vhost '<vhost>'`.
 */
export function missingQueueOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || (err as { code?: unknown }).code !== 404) return undefined;
  return /no queue '([^']+)'/.exec(String((err as { message?: unknown }).message ?? ''))?.[1] ?? 'asked for';
}

/** Runs `action`; a missing queue becomes a {@link QueueMissingError} (an OJS 404) instead of an internal error. */
export async function orQueueMissing<T>(action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (err) {
    const queue = missingQueueOf(err);
    if (queue !== undefined) throw new QueueMissingError(queue, { cause: err });
    throw err;
  }
}
