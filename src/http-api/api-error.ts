import { ConfigError, DuplicateJobError, StagecoachError, type ErrorCode } from '../errors/errors.js';

/**
 * An error the admin API answers with a status of its own choosing (a route's 405, a refused
 * field's 422), where the code alone would map to another. Every other StagecoachError is mapped
 * by its code (see {@link toOjsError}).
 */
export class ApiError extends StagecoachError {
  constructor(
    readonly status: number,
    code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Headers the answer carries besides the ones its code implies (a full queue's depth and bound). */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(code, message);
  }
}

/** An OJS error object: what every non-2xx answer of the admin API carries. */
export interface OjsErrorBody {
  error: {
    code: string;
    message: string;
    retryable: boolean;
    details?: Record<string, unknown>;
    /** The binding's class of a 422 (`validation_error`). */
    type?: string;
    hint?: string;
    docs_url?: string;
    /** The request's id (`X-Request-Id`; binding 16.1). */
    request_id?: string;
  };
}

const STATUS_OF: Partial<Record<ErrorCode, number>> = {
  INVALID_REQUEST: 400,
  TENANT_REQUIRED: 400,
  INVALID_RETRY_POLICY: 400,
  INVALID_PAYLOAD: 400,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  CONFLICT: 409,
  UNROUTABLE: 409,
  DUPLICATE: 409,
  TOPOLOGY_CONFLICT: 409,
  INVALID_CONFIG: 422,
  TENANT_LIMIT_EXCEEDED: 429,
  // ojs-backpressure 7.1, ojs-errors 4.4: the producer may try again once the queue has room.
  QUEUE_FULL: 429,
  // The queue's `allowed_job_types` refuse it: the request, not the server, is at fault.
  JOB_TYPE_NOT_ALLOWED: 422,
  UNSUPPORTED: 422,
};

/** Seconds a refused producer is told to wait (`Retry-After`) before it tries a full queue again. */
export const QUEUE_FULL_RETRY_AFTER_S = 1;

/** Failures of the broker or its management API: asking again later may work. */
const RETRYABLE: ReadonlySet<string> = new Set(['CONNECTION_FAILED', 'MANAGEMENT_FAILED', 'INTERNAL_ERROR', 'QUEUE_FULL']);

/**
 * The HTTP status and OJS error object for anything a handler threw. A StagecoachError keeps its
 * code and message (they are written for operators and never hold a secret: the management
 * client redacts passwords); anything else is an INTERNAL_ERROR whose message is not shown
 * (it is logged instead), since it may say more about the server than a client should read.
 */
export function toOjsError(err: unknown): { status: number; body: OjsErrorBody; headers?: Record<string, string> } {
  if (err instanceof StagecoachError) {
    const status = err instanceof ApiError ? err.status : (STATUS_OF[err.code] ?? 500);
    const details =
      err instanceof ApiError || err instanceof DuplicateJobError
        ? err.details
        : err instanceof ConfigError
          ? { key: err.key, expected: err.expected }
          : undefined;
    const extra = headersOf(err);
    return {
      status,
      body: {
        error: {
          code: err.code,
          message: err.message,
          // A refusal that names when to try again may pass then.
          retryable: RETRYABLE.has(err.code) || extra?.headers['Retry-After'] !== undefined,
          ...(details === undefined ? {} : { details }),
        },
      },
      ...extra,
    };
  }
  return {
    status: 500,
    body: { error: { code: 'INTERNAL_ERROR', message: 'internal error (see the admin server log)', retryable: true } },
  };
}

/** `Retry-After` for a full queue, and the headers an {@link ApiError} names; undefined when none. */
function headersOf(err: StagecoachError): { headers: Record<string, string> } | undefined {
  const headers: Record<string, string> = {
    ...(err.code === 'QUEUE_FULL' ? { 'Retry-After': String(QUEUE_FULL_RETRY_AFTER_S) } : {}),
    ...(err instanceof ApiError ? err.headers : undefined),
  };
  return Object.keys(headers).length === 0 ? undefined : { headers };
}
