import { toOjsError, type OjsErrorBody } from '../api-error.js';

/** Where the binding's errors are explained. */
export const BINDING_DOCS_URL = 'https://github.com/openjobspec/spec/blob/main/spec/ojs-http-binding.md';

const HINTS: Readonly<Record<string, string>> = {
  not_found: 'check the id: GET /ojs/v1/jobs lists the jobs this server knows',
  duplicate:
    'a job with this id exists (push without "id" to get a fresh one), or one holding the same uniqueness key (details.existing_job_id)',
  conflict: 'the job is not in a state that allows this; GET /ojs/v1/jobs/{id} shows its state',
  invalid_payload: 'the request body must be an OJS job (spec/ojs-http-binding.md section 4)',
  invalid_request: 'see the message for the field that is wrong',
  invalid_retry_policy: 'options.retry must follow spec/ojs-retry.md section 11 (the message names the field)',
  tenant_limit_exceeded:
    "the tenant reached a limit of its own (details.limit, or the message): try again after Retry-After seconds when there is one, or raise the tenant's limit",
  QUEUE_FULL: "the queue is at its max_size: try again after Retry-After seconds (an OJS SDK does), or raise the queue's max_size",
  job_type_not_allowed:
    "the queue's allowed_job_types do not name this type: push it to another queue, or change the queue's configuration",
  unroutable:
    'the job is kept in the unroutable queue: open the queue again (resume it, or provision its tenant), then `stagecoach unroutable replay`',
  unsupported: 'GET /ojs/manifest names the conformance level and extensions this server serves',
  unauthorized: 'send "Authorization: Bearer <token>" (an admin token, or a tenant token from `stagecoach credentials <T> --role http`)',
};

/**
 * Codes an extension's binding spells out as the error catalog writes them (SCREAMING_SNAKE_CASE):
 * ojs-backpressure 7.1 answers a full queue with `QUEUE_FULL`, and its clients compare it so.
 */
const CATALOG_CODES: ReadonlySet<string> = new Set(['QUEUE_FULL']);

/**
 * The binding's error object: the admin API's OJS error (toOjsError: status and message) with the
 * binding's lowercase code (`not_found`, `duplicate`, `invalid_payload`...; `QUEUE_FULL` as
 * ojs-backpressure writes it), a hint and a docs URL (spec/ojs-http-binding.md section 7).
 */
export function toBindingError(err: unknown): { status: number; body: OjsErrorBody; headers?: Record<string, string> } {
  const { status, body, headers } = toOjsError(err);
  const code = CATALOG_CODES.has(body.error.code) ? body.error.code : body.error.code.toLowerCase();
  const validation = VALIDATION.get(code);
  return {
    status: validation ?? status,
    body: {
      error: {
        ...body.error,
        code,
        ...(validation === undefined ? {} : { type: 'validation_error' }),
        hint: HINTS[code] ?? 'see the message',
        docs_url: BINDING_DOCS_URL,
      },
    },
    ...(headers === undefined ? {} : { headers }),
  };
}

/**
 * Requests well formed but refused by a rule of the spec about their content: `422` with
 * `type: validation_error` (spec/ojs-retry.md section 11, the suite's L1-RTR-011/012), where
 * the admin API answers 400. A body the binding cannot read as a job stays `400 invalid_payload`.
 */
const VALIDATION: ReadonlyMap<string, number> = new Map([['invalid_retry_policy', 422]]);
