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
  DUPLICATE: 409,
  TOPOLOGY_CONFLICT: 409,
  INVALID_CONFIG: 422,
  TENANT_LIMIT_EXCEEDED: 429,
};

/** Failures of the broker or its management API: asking again later may work. */
const RETRYABLE: ReadonlySet<string> = new Set(['CONNECTION_FAILED', 'MANAGEMENT_FAILED', 'INTERNAL_ERROR']);

/**
 * The HTTP status and OJS error object for anything a handler threw. A StagecoachError keeps its
 * code and message (they are written for operators and never hold a secret: the management
 * client redacts passwords); anything else is an INTERNAL_ERROR whose message is not shown
 * (it is logged instead), since it may say more about the server than a client should read.
 */
export function toOjsError(err: unknown): { status: number; body: OjsErrorBody } {
  if (err instanceof StagecoachError) {
    const status = err instanceof ApiError ? err.status : (STATUS_OF[err.code] ?? 500);
    const details =
      err instanceof ApiError || err instanceof DuplicateJobError
        ? err.details
        : err instanceof ConfigError
          ? { key: err.key, expected: err.expected }
          : undefined;
    return {
      status,
      body: {
        error: { code: err.code, message: err.message, retryable: RETRYABLE.has(err.code), ...(details === undefined ? {} : { details }) },
      },
    };
  }
  return {
    status: 500,
    body: { error: { code: 'INTERNAL_ERROR', message: 'internal error (see the admin server log)', retryable: true } },
  };
}
