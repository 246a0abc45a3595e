import type { ScheduleDefinition } from '../config/config.types.js';
import { uuidv7 } from '../job/uuid-v7.js';
import type { QueuePool } from '../queue-pools/queue-pool.js';
import type { WebhookSubscription } from '../webhooks/webhook-subscription.js';

/** Where a schedule was registered: the configuration file (changed there only) or the API and command line. */
export type ScheduleOrigin = 'config' | 'api';

/** Why an occurrence enqueued no job (OJS cron 9.2; stagecoach adds `queue_full`, a full queue refused the job, and `refused`, the job could not be routed). */
export type SkipReason = 'overlap_skip' | 'disabled' | 'dst_skip' | 'queue_full' | 'refused';

/** Content type of a message of the schedules stream. */
export const SCHEDULE_CONTENT_TYPE = 'application/vnd.stagecoach.schedule+json';

/**
 * The records of the schedules stream (`<prefix>.schedules`, docs/schedules.md): registrations
 * and what became of each occurrence. Every reader folds them, in stream order, into the same
 * ScheduleBook; the stream is the only place a schedule's state is kept, so it survives a
 * restart of every process.
 *
 * A `fired` record is committed in one AMQP transaction with the job it names (and the job's
 * `created` report): one is on the broker exactly when the other is. That is what lets a new
 * leader know, from the stream alone, which occurrences were enqueued.
 */
export type ScheduleRecord =
  /** A schedule registered or changed (upsert; OJS cron 8.1). */
  | (Stamp & { kind: 'put'; schedule: ScheduleDefinition; origin: ScheduleOrigin })
  | (Stamp & { kind: 'remove'; key: string })
  /** Enabled or disabled without changing it (OJS cron 8.5). */
  | (Stamp & { kind: 'toggle'; key: string; enabled: boolean })
  /** An occurrence's job was enqueued (for `tenant`, when per tenant); `trigger`: the `trigger` record it answers. */
  | (Stamp & { kind: 'fired'; key: string; tenant?: string; occurrence: string; job: string; trigger?: string })
  /** An occurrence enqueued nothing. `job`: the job still going (overlap_skip). */
  | (Stamp & { kind: 'skipped'; key: string; tenant?: string; occurrence: string; reason: SkipReason; job?: string })
  /** Fire now, once (`cron trigger`): the leader fires it and writes its `fired`. */
  | (Stamp & { kind: 'trigger'; key: string; tenant?: string })
  /** A tenant provisioned while a leader ran: it joins per-tenant schedules at their next occurrence. */
  | (Stamp & { kind: 'joined'; tenant: string })
  /** A tenant retired: it leaves every schedule. */
  | (Stamp & { kind: 'left'; tenant: string })
  /** A webhook subscription created or changed (docs/webhooks.md): kept here, with the other registrations made over HTTP. */
  | (Stamp & { kind: 'webhook'; subscription: WebhookSubscription })
  /** A webhook subscription deleted. */
  | (Stamp & { kind: 'unhook'; subscription: string })
  /** A queue pool for HTTP workers defined or redefined (docs/http-binding.md "Queue pools"). */
  | (Stamp & { kind: 'pool'; pool: QueuePool })
  /** A queue pool removed. */
  | (Stamp & { kind: 'unpool'; name: string })
  /**
   * The whole state, written by the leader now and then: readers need nothing before the last one.
   * `covers`: the id of the last record folded into it. Records another process appended between
   * that one and the snapshot are not in it: readers fold them again after it (ScheduleBook).
   */
  | (Stamp & { kind: 'snapshot'; state: BookSnapshot; covers?: string })
  /** Every schedule, webhook subscription and queue pool removed (`stagecoach admin --test-reset` only). */
  | (Stamp & { kind: 'clear' })
  /** Written by a reader to learn when it has read everything before it (ScheduleStream.caughtUp). */
  | (Stamp & { kind: 'mark' })
  /** A process became the leader. */
  | (Stamp & { kind: 'leader'; process: string });

export interface Stamp {
  /** UUIDv7. */
  id: string;
  /** When it was written, ISO 8601. */
  at: string;
}

/** A schedule's state as a snapshot keeps it (see ScheduleBook). */
export interface SnapshotEntry {
  schedule: ScheduleDefinition;
  origin: ScheduleOrigin;
  created_at: string;
  updated_at: string;
  enabled: boolean;
  enabled_at: string;
  run_count: number;
  last_run_at?: string;
  /** Tenant (`""` for none) -> the last occurrence handled (fired or skipped), epoch ms. */
  handled: Record<string, number>;
  /** Tenant -> the job of its last fired occurrence. */
  last_jobs: Record<string, string>;
  recent: OccurrenceSummary[];
}

export interface BookSnapshot {
  entries: SnapshotEntry[];
  /** Tenant -> when it joined while a leader ran, epoch ms. */
  joined: Record<string, number>;
  /** Triggers not fired yet. */
  triggers: TriggerRecord[];
  /** Webhook subscriptions (absent in snapshots written before there were any). */
  webhooks?: WebhookSubscription[];
  /** Queue pools (absent in snapshots written before there were any). */
  queue_pools?: QueuePool[];
}

export type TriggerRecord = Extract<ScheduleRecord, { kind: 'trigger' }>;

/** What became of one occurrence (all its tenants), for people: `cron list`, the dashboard. */
export interface OccurrenceSummary {
  occurrence: string;
  fired: number;
  skipped: number;
  /** The job of a schedule without tenants, or of the first tenant. */
  job?: string;
  manual?: boolean;
}

type Unstamped<R> = R extends Stamp ? Omit<R, keyof Stamp> : never;

/** A record with its id and time. */
export function scheduleRecord<R extends Unstamped<ScheduleRecord>>(record: R): R & Stamp {
  return { id: uuidv7(), at: new Date().toISOString(), ...record };
}

/** The key of a schedule: its name, or `<owner>/<name>` for a tenant's (names are unique per owner). */
export function scheduleKey(schedule: Pick<ScheduleDefinition, 'name' | 'owner'>): string {
  return schedule.owner === undefined ? schedule.name : `${schedule.owner}/${schedule.name}`;
}

/** The records a message holds: one, or none when it is not a schedule record. */
export function parseScheduleRecord(content: Buffer): ScheduleRecord | undefined {
  try {
    const value = JSON.parse(content.toString('utf8')) as ScheduleRecord;
    return typeof value === 'object' && value !== null && typeof value.kind === 'string' && typeof value.id === 'string'
      ? value
      : undefined;
  } catch {
    return undefined;
  }
}
