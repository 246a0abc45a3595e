import type { OverlapPolicy, RetryPolicy, ScheduleConfig } from '../../config/config.types.js';
import { StagecoachError } from '../../errors/errors.js';

/** The fields a registration body may carry, in either OJS shape, and stagecoach's own. */
const KNOWN = new Set([
  'name',
  'cron',
  'expression',
  'timezone',
  'type',
  'args',
  'meta',
  'options',
  'job_template',
  'overlap_policy',
  'enabled',
  'description',
  'tenants',
  'spread',
  'batch',
  // System-managed (OJS cron 2.2): ignored when a client sends them.
  'last_run_at',
  'next_run_at',
  'run_count',
  'created_at',
  'status',
]);

function invalid(message: string): StagecoachError {
  return new StagecoachError('INVALID_REQUEST', message);
}

function objectOf(value: unknown, name: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw invalid(`"${name}" must be a JSON object`);
  return value as Record<string, unknown>;
}

/**
 * Reads `POST /ojs/v1/cron` into a schedule as written (compileSchedule checks it then). Both
 * shapes of the spec are taken: the cron spec's (spec/ojs-cron.md 8.1: `cron`, `type`, `args`,
 * `options`) and openapi.yaml's (`expression`, `job_template: { type, args, options }`), which
 * the conformance suite sends; `overlap_policy` `cancel` (openapi's word) is `cancel_previous`.
 * Options: `queue`, `priority`, `timeout` (seconds) or `timeout_ms`, `retry`, `meta`.
 * @throws StagecoachError INVALID_REQUEST for a body that is not an object, or a field of another type.
 */
export function readCronInput(body: unknown): { name: string; schedule: ScheduleConfig } {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalid('the request body must be a cron job (a JSON object)');
  const input = body as Record<string, unknown>;
  const unknown = Object.keys(input).filter((key) => !KNOWN.has(key));
  if (unknown.length > 0) throw invalid(`unknown field${unknown.length === 1 ? '' : 's'} ${unknown.map((key) => `"${key}"`).join(', ')}`);
  if (typeof input.name !== 'string') throw invalid('"name" is required: the cron job\'s unique name');
  const template = objectOf(input.job_template, 'job_template');
  const options = { ...objectOf(template.options, 'job_template.options'), ...objectOf(input.options, 'options') };
  const cron = input.cron ?? input.expression;
  if (typeof cron !== 'string') throw invalid('"expression" (or "cron") is required: a cron expression such as "0 2 * * *"');
  const timeoutMs = options.timeout_ms;
  if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs > 0))
    throw invalid('"options.timeout_ms" must be a positive number');
  const meta = {
    ...objectOf(template.meta, 'job_template.meta'),
    ...objectOf(options.meta, 'options.meta'),
    ...objectOf(input.meta, 'meta'),
  };
  const overlap = input.overlap_policy === 'cancel' ? 'cancel_previous' : input.overlap_policy;
  const schedule: ScheduleConfig = {
    cron,
    type: (input.type ?? template.type) as string,
    ...(input.timezone === undefined ? {} : { timezone: input.timezone as string }),
    ...((options.queue ?? template.queue) === undefined ? {} : { queue: (options.queue ?? template.queue) as string }),
    ...((input.args ?? template.args) === undefined ? {} : { args: (input.args ?? template.args) as unknown[] }),
    ...(Object.keys(meta).length === 0 ? {} : { meta }),
    ...(options.priority === undefined ? {} : { priority: options.priority as number }),
    ...(timeoutMs !== undefined
      ? { timeout: Math.ceil(timeoutMs / 1000) }
      : options.timeout === undefined
        ? {}
        : { timeout: options.timeout as number }),
    ...(options.retry === undefined ? {} : { retry: options.retry as RetryPolicy }),
    ...(input.tenants === undefined ? {} : { tenants: input.tenants as ScheduleConfig['tenants'] }),
    ...(input.spread === undefined ? {} : { spread: input.spread as string }),
    ...(overlap === undefined ? {} : { overlap_policy: overlap as OverlapPolicy }),
    ...(input.batch === undefined ? {} : { batch: input.batch as boolean }),
    ...(input.enabled === undefined ? {} : { enabled: input.enabled as boolean }),
    ...(input.description === undefined || input.description === null ? {} : { description: input.description as string }),
  };
  return { name: input.name, schedule };
}
