/**
 * Errors across the thread boundary. Structured clone keeps an Error's message and stack but
 * not its class, and the failure logic on the main thread decides by class (`RetryJob`,
 * `DiscardJob`, `DeadLetterJob`) and by `code`/`type` (`NonRetryableError`, UNKNOWN_OUTPUT...).
 * So an error is flattened to data on one side and rebuilt on the other, as the class the
 * failure logic knows.
 */
import { StagecoachError, type ErrorCode } from '../../errors/errors.js';
import { DeadLetterJob, DiscardJob, RetryJob } from '../../retry/handler-outcomes.js';

export interface TransferredError {
  /** Which class to rebuild: a handler outcome, some `StagecoachError`, or any other error. */
  kind: 'retry' | 'discard' | 'dead-letter' | 'stagecoach' | 'error';
  name: string;
  message: string;
  stack?: string;
  code?: string;
  type?: string;
  /** `RetryJob.delayMs`. */
  delayMs?: number;
  /** Other own fields with primitive values (a `ConfigError`'s `key`, a system error's `errno`). */
  extra?: Record<string, string | number | boolean>;
}

const KNOWN = new Set(['name', 'message', 'stack', 'code', 'type', 'delayMs']);

/** Flattens anything a handler threw (or an abort reason) into cloneable data. */
export function toTransferable(thrown: unknown): TransferredError {
  if (!(thrown instanceof Error)) return { kind: 'error', name: 'Error', message: String(thrown) };
  const fields = thrown as Error & { code?: unknown; type?: unknown; delayMs?: unknown };
  const transferred: TransferredError = { kind: kindOf(thrown), name: thrown.name, message: thrown.message };
  if (thrown.stack !== undefined) transferred.stack = thrown.stack;
  if (typeof fields.code === 'string') transferred.code = fields.code;
  if (typeof fields.type === 'string') transferred.type = fields.type;
  if (typeof fields.delayMs === 'number') transferred.delayMs = fields.delayMs;
  const extra: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(thrown)) {
    if (!KNOWN.has(key) && ['string', 'number', 'boolean'].includes(typeof value)) extra[key] = value as string | number | boolean;
  }
  if (Object.keys(extra).length > 0) transferred.extra = extra;
  return transferred;
}

/** Rebuilds an error flattened by {@link toTransferable}, with its name, stack, code and type. */
export function fromTransferable(transferred: TransferredError): Error {
  const { message } = transferred;
  let error: Error;
  switch (transferred.kind) {
    case 'retry':
      error = new RetryJob(transferred.delayMs, message);
      break;
    case 'discard':
      error = new DiscardJob(message);
      break;
    case 'dead-letter':
      error = new DeadLetterJob(message, transferred.type);
      break;
    case 'stagecoach':
      error = new StagecoachError((transferred.code ?? 'HANDLER_ERROR') as ErrorCode, message);
      break;
    default:
      error = new Error(message);
      if (transferred.code !== undefined) Object.assign(error, { code: transferred.code });
  }
  // Own fields, so that `toJobError` reads the same type (`type`, else `code`, else `name`).
  if (transferred.type !== undefined && transferred.kind !== 'dead-letter') Object.assign(error, { type: transferred.type });
  for (const [key, value] of Object.entries(transferred.extra ?? {})) {
    if (!(key in error)) Object.assign(error, { [key]: value });
  }
  error.name = transferred.name;
  if (transferred.stack !== undefined) error.stack = transferred.stack;
  return error;
}

/**
 * By the prototype chain's class names rather than `instanceof`: a stage module that resolves
 * its own copy of stagecoach throws classes this module's copy would not recognise.
 */
function kindOf(error: Error): TransferredError['kind'] {
  const names = new Set<string>();
  for (let proto: unknown = Object.getPrototypeOf(error); proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    names.add((proto as { constructor: { name: string } }).constructor.name);
  }
  if (error instanceof RetryJob || names.has(RetryJob.name)) return 'retry';
  if (error instanceof DiscardJob || names.has(DiscardJob.name)) return 'discard';
  if (error instanceof DeadLetterJob || names.has(DeadLetterJob.name)) return 'dead-letter';
  if (error instanceof StagecoachError || names.has(StagecoachError.name)) return 'stagecoach';
  return 'error';
}
