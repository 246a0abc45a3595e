import type { ApiResponse } from '../router.js';
import { packageVersion } from '../../util/package-version.js';
import type { BindingContext } from './binding-context.js';
import { OJS_VERSION } from './ojs-media.js';

/** The conformance level this server claims (the OJS conformance suite's levels; docs/http-binding.md). */
export const CONFORMANCE_LEVEL = 2;

/** `GET /ojs/manifest` (spec/ojs-http-binding.md section 8). */
export function manifest(): Promise<ApiResponse> {
  return Promise.resolve({
    status: 200,
    body: {
      specversion: OJS_VERSION,
      implementation: { name: 'stagecoach', version: packageVersion(), language: 'typescript', homepage: 'docs/http-binding.md' },
      conformance_level: CONFORMANCE_LEVEL,
      protocols: ['http', 'amqp'],
      backend: 'rabbitmq',
      // Workflows (level 3's chain, group, batch: docs/workflows.md) are served; the level claimed
      // stays the highest whose levels below all pass too.
      // `progress`: PUT|GET /ojs/v1/jobs/{id}/progress for HTTP workers (the suite's ext-progress passes).
      // `backpressure`: queue bounds through PUT /ojs/v1/admin/queues/{name}/config (ext-backpressure passes).
      // `fair-scheduling`: queue pools for HTTP workers and the pooled share's statistics (ext-fair-scheduling passes).
      extensions: [
        'rate-limiting',
        'multi-tenancy',
        'batches',
        'unique-jobs',
        'workflows',
        'progress',
        'backpressure',
        'webhooks',
        'fair-scheduling',
      ],
      // OJS unique jobs 8.3 (docs/unique-jobs.md): claims are atomic (reject, ignore), but `replace`
      // cancels its holder through the job-cancels stream, which a holder starting meanwhile outruns.
      capabilities: {
        // Level 2 (docs/schedules.md): cron over the broker, `scheduled_at` on the delay ladder, `expires_at`.
        cron_jobs: true,
        // Level 4, in part (docs/http-binding.md, Conformance): batch push, unique jobs, queue
        // pause, resume and stats, a push's rate limit, priority ordering within a queue with
        // max_priority (docs/priorities.md).
        queue_stats: true,
        delayed_jobs: true,
        job_ttl: true,
        unique_jobs: {
          strength: 'best-effort',
          mechanism:
            'PostgreSQL INSERT ... ON CONFLICT on a key table beside the job store (atomic for reject and ignore); replace cancels through the job-cancels stream; needs tracking.store postgres',
        },
      },
      endpoints: {
        jobs: '/ojs/v1/jobs',
        workers: '/ojs/v1/workers',
        workflows: '/ojs/v1/workflows',
        cron: '/ojs/v1/cron',
        health: '/ojs/v1/health',
      },
    },
  });
}

/** `GET /ojs/v1/health`: `ok` when the job store answers, 503 `error` otherwise (the broker is reached through it). */
export async function health(ctx: BindingContext): Promise<ApiResponse> {
  const started = Date.now();
  try {
    await (await ctx.admin.jobs()).get('00000000-0000-7000-8000-000000000000');
    return {
      status: 200,
      body: { status: 'ok', version: OJS_VERSION, backend: { type: 'rabbitmq', status: 'ok', latency_ms: Date.now() - started } },
    };
  } catch (err) {
    return {
      status: 503,
      body: { status: 'error', version: OJS_VERSION, backend: { type: 'rabbitmq', status: 'error', error: (err as Error).message } },
    };
  }
}
