import { loadConfig } from '../../config/load-config.js';
import type { RetryPolicy } from '../../config/config.types.js';
import { StagecoachError, UnroutableJobError } from '../../errors/errors.js';
import type { BatchCallbacks, CallbackName, HeaderValue, JobSpec } from '../../job/job.types.js';
import { checkCallbackSpec } from '../../batch/batch-callbacks.js';
import { createLogger } from '../../logging/logger.js';
import { Publisher } from '../../publisher/publisher.js';
import { validateRetryPolicy } from '../../retry/retry-policy.js';
import { validateRateLimitPolicy } from '../../job/rate-limit-policy.js';
import { parseDuration } from '../../util/duration.js';
import { isTimestamp } from '../../util/timestamp.js';
import { checkBatchId } from '../../util/batch-id.js';
import { checkTags } from '../../job/envelope.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/** The options of `stagecoach publish`, as commander hands them over (strings, unparsed). */
export interface PublishOptions {
  type: string;
  args: string;
  meta?: string;
  tenant?: string;
  /** Start the job in this batch (docs/batches.md). */
  batch?: string;
  /** The batch's OJS callbacks, JSON job specs (docs/batches.md, Callbacks); only with `batch`. */
  onComplete?: string;
  onSuccess?: string;
  onFailure?: string;
  header: string[];
  /** `--tag`, repeatable. */
  tag?: string[];
  priority?: string;
  timeout?: string;
  retry?: string;
  rateLimit?: string;
  enqueueTtl?: string;
  scheduledAt?: string;
  delay?: string;
  config?: string;
}

/**
 * `stagecoach publish <queue> --type X [--args JSON] [--meta JSON] [--tenant T] [--header k=v]... [--tag T]...
 * [--priority N] [--timeout S] [--retry JSON] [--rate-limit JSON] [--enqueue-ttl D] [--scheduled-at T | --delay D]
 * [--batch B [--on-complete JSON] [--on-success JSON] [--on-failure JSON]]`
 *
 * Every option is checked before the configuration is read or the broker touched: a mistake
 * exits 2 naming the option and what it takes (`--retry` as OJS `INVALID_RETRY_POLICY`).
 */
export async function publish(queue: string, opts: PublishOptions): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const batch = opts.batch === undefined ? undefined : checkBatchId(opts.batch, '--batch');
  const callbacks = callbacksOf(opts);
  if (callbacks !== undefined && batch === undefined)
    usage("--on-complete, --on-success and --on-failure need --batch: they are the batch's callbacks");
  const spec = jobFields(opts);
  const delayMs = opts.delay === undefined ? undefined : delayOf(opts.delay);
  const config = await loadConfig(opts.config);
  const publisher = await Publisher.connect(config, {
    log: createLogger({ service: 'stagecoach', command: 'publish' }),
    source: 'stagecoach/publish',
  });
  try {
    // --delay counts from the moment of publishing, not from the start of the command.
    const scheduledAt = delayMs === undefined ? spec.scheduled_at : new Date(Date.now() + delayMs).toISOString();
    const id = await publisher
      .publish(queue, {
        ...spec,
        ...(scheduledAt === undefined ? {} : { scheduled_at: scheduledAt }),
        ...(tenant === undefined ? {} : { tenant }),
        ...(batch === undefined ? {} : { batch }),
        ...(callbacks === undefined ? {} : { callbacks }),
      })
      .catch((err: unknown) => {
        // The job exists, in the unroutable queue: its id still goes to stdout (for `unroutable replay`), and the exit is 1.
        if (err instanceof UnroutableJobError) process.stdout.write(`${err.jobId}\n`);
        throw err;
      });
    process.stdout.write(`${id}\n`);
  } finally {
    await publisher.close();
  }
  return EXIT_OK;
}

/** The job the options describe (without its tenant and a `--delay`, which counts from publishing). */
function jobFields(opts: PublishOptions): JobSpec {
  const args = parseJson(opts.args, '--args');
  if (!Array.isArray(args)) usage(`--args must be a JSON array, got ${opts.args}`);
  const spec: JobSpec = { type: opts.type, args: args as unknown[], headers: headersOf(opts.header) };
  if (opts.meta !== undefined) {
    const meta = parseJson(opts.meta, '--meta');
    if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) usage(`--meta must be a JSON object, got ${opts.meta}`);
    spec.meta = meta as Record<string, unknown>;
  }
  if (opts.tag !== undefined && opts.tag.length > 0) {
    const problem = checkTags(opts.tag);
    if (problem !== undefined) usage(`--tag: the tags ${problem}`);
    spec.tags = opts.tag;
  }
  if (opts.priority !== undefined) {
    // OJS priorities are integers, higher first; the AMQP mapping keeps their order (amqp-priority.ts).
    if (!/^-?\d+$/.test(opts.priority)) usage(`--priority must be an integer, got "${opts.priority}"`);
    spec.priority = Number(opts.priority);
  }
  if (opts.timeout !== undefined) {
    const seconds = Number(opts.timeout);
    if (!/^\d+(\.\d+)?$/.test(opts.timeout) || !(seconds > 0)) {
      usage(`--timeout must be a positive number of seconds, got "${opts.timeout}"`);
    }
    spec.timeout = seconds;
  }
  if (opts.retry !== undefined) {
    const retry = parseJson(opts.retry, '--retry');
    validateRetryPolicy(retry, '--retry');
    spec.retry = retry as RetryPolicy;
  }
  if (opts.rateLimit !== undefined) {
    const policy = parseJson(opts.rateLimit, '--rate-limit');
    validateRateLimitPolicy(policy, '--rate-limit');
    if (policy !== undefined) spec.rate_limit = policy;
  }
  if (opts.enqueueTtl !== undefined) {
    const ttl = parseDuration(opts.enqueueTtl);
    if (ttl === undefined || ttl <= 0)
      usage(`--enqueue-ttl must be a positive ISO 8601 duration such as "PT10M", got "${opts.enqueueTtl}"`);
    spec.enqueue_ttl = opts.enqueueTtl;
  }
  if (opts.scheduledAt !== undefined) {
    if (!isTimestamp(opts.scheduledAt)) {
      usage(`--scheduled-at must be an ISO 8601 timestamp with a time zone, such as "2026-01-01T09:00:00Z", got "${opts.scheduledAt}"`);
    }
    spec.scheduled_at = opts.scheduledAt;
  }
  return spec;
}

/**
 * The batch callbacks of `--on-complete`, `--on-success`, `--on-failure` (each a JSON job spec),
 * checked in shape before the broker is touched; whether they fit the configuration (queue,
 * tenant) the publisher checks before it sends anything. Undefined when none is given.
 */
function callbacksOf(opts: PublishOptions): BatchCallbacks | undefined {
  const given: Array<[CallbackName, string, string | undefined]> = [
    ['on_complete', '--on-complete', opts.onComplete],
    ['on_success', '--on-success', opts.onSuccess],
    ['on_failure', '--on-failure', opts.onFailure],
  ];
  let callbacks: BatchCallbacks | undefined;
  for (const [name, option, text] of given) {
    if (text === undefined) continue;
    (callbacks ??= {})[name] = checkCallbackSpec(parseJson(text, option), option);
  }
  return callbacks;
}

/** Milliseconds of `--delay` (any wait: one beyond the delay ladder's reach hops on, docs/scheduling.md). */
function delayOf(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined) return usage(`--delay must be an ISO 8601 duration such as "PT30S", got "${text}"`);
  return ms;
}

function headersOf(pairs: readonly string[]): Record<string, HeaderValue> {
  const headers: Record<string, HeaderValue> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) usage(`--header takes key=value, got "${pair}"`);
    headers[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return headers;
}

function parseJson(text: string, option: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    return usage(`${option} is not JSON: ${(err as Error).message}`);
  }
}

/** Bad usage: exit 2 with this message. */
function usage(message: string): never {
  throw new StagecoachError('INVALID_REQUEST', message);
}
