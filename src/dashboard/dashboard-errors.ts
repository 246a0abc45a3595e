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
