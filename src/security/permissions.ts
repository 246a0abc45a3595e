import type { CompiledConfig } from '../config/config.types.js';
import { DELAY_LEVELS } from '../topology/delay-topology.js';
import { BrokerNames } from '../topology/names.js';
import type { Permissions, TopicPermission } from '../broker-management/management-client.js';
import { tenantUserName, type TenantRole } from './broker-users.js';

export interface UserGrant {
  user: string;
  permissions: Permissions;
  topics: TopicPermission[];
}

/** Anchored alternatives: `^a$|^b$`. */
function anyOf(...patterns: string[]): string {
  return patterns.map((pattern) => `^${pattern}$`).join('|');
}

function literal(name: string): string {
  return name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * What the control listener needs (control-listener.ts): a server-named exclusive queue
 * (`amq.gen-…`: configure to declare it, write to bind it, read to consume it) bound to the
 * control exchange (read). Clients cannot name a queue `amq.*` themselves, and an exclusive
 * queue is locked to its connection, so this opens nothing of anyone else's.
 */
const SERVER_NAMED = 'amq\\.gen-.*';

/**
 * The grant of a tenant's producer or stage user. Queue names, tenants and variants are slugs
 * without dots, so `[^.]+` is exactly one name segment and the tenant sits at a fixed position:
 * `<prefix>.queue.<queue>.<tenant>[.<variant>]`. Any queue of the tenant matches, the implicit
 * ones too, and no queue of another tenant or shared queue does.
 *
 * - producer(T): write `tenant.T` (tenant-scoped jobs, routed by key within T only), `direct`
 *   (shared queues; a job there claiming another tenant is refused by the stage's user_id check)
 *   and `retry` for scheduled jobs (topic permission: only keys that end in a due queue of T or a
 *   shared due queue, the queues `tenant.T` and `direct` reach). Nothing to configure or read: no
 *   root (whose header routing would let it claim any tenant), no default exchange (which
 *   reaches any queue by name).
 * - stage(T): read its tenant's main, due and suspect queues and the control exchange; write
 *   what settlement and emits need: `tenant.T`, `direct`, `retry` (topic permission: only keys
 *   that end in its own due or suspect queues, or a shared due queue for a scheduled emit),
 *   `dlx` (a direct exchange: its routing keys cannot be restricted, see docs/security.md).
 *
 * The broker validates `user_id` on the way into the ladder and keeps it through it, so a job
 * scheduled into a shared due queue meets the same user_id check as one sent by `direct`.
 *
 * Both may write `tracking`, the exchange into the batch-tracking stream (Publisher's `created`
 * reports, a stage's settlement reports); the same pattern matches the stream itself, where write
 * only allows binding it as a destination, which also needs read on the source exchange: none.
 * Not the default exchange: write on `amq.default` would reach every queue by name.
 *
 * A stage user may read the `job-cancels` stream and write its exchange (the `mark` that tells it
 * it read the stream to the end); a cancel written there by anyone but the operator or the
 * internal user is ignored by its readers (the broker-validated `user_id`, see JobCancels).
 *
 * A stage user may also write `park` with its tenant as the only key (a topic permission): it
 * parks the jobs of a paused batch or tenant into its own tenant's parked queue, nobody else's.
 *
 * Both may also write `events` with the keys of the events a producer or a stage emits
 * (`queue.full`, and for a stage the `job.*` events of the jobs it settles; topic permission):
 * the administration events (`tenant.retired`...) are the operator's. Events are information,
 * so what a tenant user can claim there is no more than that a queue refused it a job, or what
 * became of a job.
 */
export function tenantUserGrant(config: CompiledConfig, role: TenantRole, tenant: string): UserGrant {
  const names = new BrokerNames(config.prefix);
  const user = tenantUserName(config.prefix, role, tenant);
  const entries = [literal(names.tenantExchange(tenant)), literal(names.direct)];
  const p = literal(config.prefix);
  const t = literal(tenant);
  const ownQueue = (kinds: string): string => `${p}\\.(${kinds})\\.[^.]+\\.${t}(\\.[^.]+)?`;
  const sharedDue = `${p}\\.due\\.[^.]+`;
  if (role === 'producer') {
    return {
      user,
      permissions: {
        configure: '',
        write: anyOf(...entries, literal(names.retry), literal(names.events), literal(names.tracking)),
        read: '',
      },
      topics: [retryTopic(names, `(${ownQueue('due')}|${sharedDue})`), eventsTopic(names)],
    };
  }
  return {
    user,
    permissions: {
      configure: anyOf(SERVER_NAMED),
      write: anyOf(
        ...entries,
        literal(names.retry),
        literal(names.dlx),
        literal(names.events),
        literal(names.tracking),
        literal(names.jobCancels),
        literal(names.park),
        SERVER_NAMED,
      ),
      read: anyOf(ownQueue('queue|due|suspect'), literal(names.control), literal(names.jobCancels), SERVER_NAMED),
    },
    topics: [
      retryTopic(names, `(${ownQueue('due|suspect')}|${sharedDue})`),
      eventsTopic(names, STAGE_EVENT_TYPES),
      // Parks only into its own tenant's parked queue: `batch resume` sends parked jobs on as the operator.
      { exchange: names.park, write: anyOf(t), read: '' },
    ],
  };
}

/**
 * The internal user of shared-queue stages, which serve every tenant: read the shared queues
 * (`<prefix>.queue.<queue>`, one segment after the kind) and control; write `root` (a job for
 * any tenant, which lands in `unroutable` when the tenant is not provisioned), `direct`, `tracking`, `retry`
 * (keys ending in shared due or suspect queues, or in any tenant's due queue: a scheduled emit
 * goes where `root` would have sent it), `dlx`, `park` (any tenant's key: it serves them all), and
 * `events` with the keys a stage emits.
 */
export function internalUserGrant(config: CompiledConfig): UserGrant {
  const names = new BrokerNames(config.prefix);
  const p = literal(config.prefix);
  const sharedQueue = (kinds: string): string => `${p}\\.(${kinds})\\.[^.]+`;
  return {
    user: config.security.internalUser,
    permissions: {
      configure: anyOf(SERVER_NAMED),
      write: anyOf(
        literal(names.root),
        literal(names.direct),
        literal(names.retry),
        literal(names.dlx),
        literal(names.events),
        literal(names.tracking),
        literal(names.jobCancels),
        literal(names.park),
        SERVER_NAMED,
      ),
      read: anyOf(sharedQueue('queue|due|suspect'), literal(names.control), literal(names.jobCancels), SERVER_NAMED),
    },
    topics: [
      retryTopic(names, `(${sharedQueue('due|suspect')}|${p}\\.due\\.[^.]+\\.[^.]+(\\.[^.]+)?)`),
      eventsTopic(names, STAGE_EVENT_TYPES),
    ],
  };
}

/** The delay ladder's routing key is DELAY_LEVELS bits, then the destination queue (delay-topology.ts). */
function retryTopic(names: BrokerNames, destination: string): TopicPermission {
  return { exchange: names.retry, write: `^([01]\\.){${DELAY_LEVELS}}${destination}$`, read: '' };
}

/** Event types a producer or a stage publishes (see events/queue-full-reporter.ts). */
const PROCESS_EVENT_TYPES = ['queue.full'];
/** And those a stage publishes about the jobs it settles, for queues with `events` on (events/job-events.ts). */
const STAGE_EVENT_TYPES = [...PROCESS_EVENT_TYPES, 'job.completed', 'job.failed', 'job.discarded', 'job.cancelled'];

function eventsTopic(names: BrokerNames, types: readonly string[] = PROCESS_EVENT_TYPES): TopicPermission {
  return { exchange: names.events, write: anyOf(...types.map(literal)), read: '' };
}
