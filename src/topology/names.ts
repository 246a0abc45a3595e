import { flagName } from '../flags/flag.js';
import { StagecoachError } from '../errors/errors.js';
import { queueOfWord, queueWord } from '../util/queue-name.js';

/** RabbitMQ's longest queue or exchange name, in bytes (an AMQP short string). */
export const MAX_BROKER_NAME_BYTES = 255;

/**
 * Every name stagecoach uses on the broker, in one place (docs/broker.md). The names of broker
 * flags (markers, the read lock) are made in src/flags/flag.ts and only handed out here.
 * A logical queue is written as its word (queueWord: its dots as `~`), and tenants and variants
 * have no dots, so the dotted names below never collide and read back one way (parseBrokerName).
 */
export class BrokerNames {
  constructor(readonly prefix: string) {}

  /** Headers exchange every tenant-scoped job is published to. */
  get root(): string {
    return `${this.prefix}.root`;
  }
  /** Direct exchange for shared queues, routing key = logical queue name. */
  get direct(): string {
    return `${this.prefix}.direct`;
  }
  /** Dead-letter exchange, routing key = dead-letter queue name. */
  get dlx(): string {
    return `${this.prefix}.dlx`;
  }
  /** Fanout exchange and queue (same name) keeping everything no queue would take. */
  get unroutable(): string {
    return `${this.prefix}.unroutable`;
  }
  /** Direct exchange of a tenant; its existence is the tenant-provisioned flag (src/flags/flag.ts). */
  tenantExchange(tenant: string): string {
    return flagName(this.prefix, { kind: 'tenant-provisioned', tenant });
  }
  /** Headers exchange choosing among a queue's variant queues for one tenant. */
  variantExchange(queue: string, tenant: string): string {
    return brokerName([this.prefix, 'variants', queueWord(queue), tenant]);
  }
  /** Fanout exchange catching what no variant took, in front of the general queue. */
  generalExchange(queue: string, tenant: string): string {
    return brokerName([this.prefix, 'general', queueWord(queue), tenant]);
  }
  /** Physical queue: shared (`tenant` undefined), tenant-scoped, or a tenant's variant queue. */
  queue(queue: string, tenant?: string, variant?: string): string {
    return brokerName([this.prefix, 'queue', queueWord(queue), tenant, variant]);
  }
  /**
   * Where jobs redelivered after a crash wait to run one at a time (prefetch 1), so that a
   * crash there is attributed to exactly one job. One per physical queue.
   */
  suspectQueue(queue: string, tenant?: string, variant?: string): string {
    return brokerName([this.prefix, 'suspect', queueWord(queue), tenant, variant]);
  }
  /**
   * Where a physical queue's jobs come back when their wait is over: retries from the delay
   * ladder and deliveries handed back unstarted. Unbounded, unlike the main queue, because these
   * jobs were admitted once already: the broker never dead-letters into a full queue.
   */
  dueQueue(queue: string, tenant?: string, variant?: string): string {
    return brokerName([this.prefix, 'due', queueWord(queue), tenant, variant]);
  }
  deadQueue(queue: string, tenant?: string): string {
    return brokerName([this.prefix, 'dead', queueWord(queue), tenant]);
  }
  /** Topic exchange where retries enter the delay ladder (routing key: delay bits, then destination). */
  get retry(): string {
    return `${this.prefix}.retry`;
  }
  /** Exchange and queue (same name) of delay level k: the queue holds messages for 2^k seconds. */
  delayLevel(level: number): string {
    return `${this.prefix}.delay.${level}`;
  }
  /** Topic exchange at the bottom of the ladder: routes a delayed job to its physical queue. */
  get delayDeliver(): string {
    return `${this.prefix}.delay.deliver`;
  }
  /** Fanout exchange that carries control messages (pause, resume, quiet...) to every running stage. */
  get control(): string {
    return `${this.prefix}.control`;
  }
  /**
   * Marker exchange of a queue state other than active (src/queue-state/queue-state.ts): per physical
   * queue for `paused`, per logical queue and tenant for `draining` (a variant is ignored).
   */
  stateMarker(state: 'paused' | 'draining', queue: string, tenant?: string, variant?: string): string {
    return flagName(
      this.prefix,
      state === 'paused' ? { kind: 'queue-paused', queue, tenant, variant } : { kind: 'queue-draining', queue, tenant },
    );
  }
  /** Topic exchange of the OJS events (`queue.full`, `tenant.retired`...), routing key = event type. */
  get events(): string {
    return `${this.prefix}.events`;
  }
  /** RabbitMQ stream of batch settlement reports (docs/batches.md). */
  get tracking(): string {
    return `${this.prefix}.tracking`;
  }

  /** Stream (and fanout exchange of the same name) of schedules and their occurrences (docs/schedules.md). */
  get schedules(): string {
    return `${this.prefix}.schedules`;
  }

  /** Exclusive queue held by the scheduler's leader (docs/schedules.md): one connection at a time, gone with it. */
  get schedulerLeader(): string {
    return flagName(this.prefix, { kind: 'scheduler-leader' });
  }

  /** Stream (and fanout exchange of the same name) of `job cancel` directives, read by every stage (docs/job-state.md). */
  get jobCancels(): string {
    return `${this.prefix}.job-cancels`;
  }
  /**
   * Topic exchange where stages park the jobs of a paused batch or tenant (docs/batches.md),
   * routing key = the job's tenant (`_` for none). Its alternate exchange is `unroutable`: a job
   * parked where no parked queue is bound is kept, never dropped.
   */
  get park(): string {
    return `${this.prefix}.park`;
  }
  /**
   * Where parked jobs wait for `resume`, every tenant's (bound to `park` with `#`): made on
   * demand rarely enough that one queue, scanned by `resume`, beats one per tenant or batch, which
   * would have to be declared before a stage may park into it and deleted without racing one.
   */
  get parked(): string {
    return `${this.prefix}.parked`;
  }
  /**
   * Marker exchange of a batch directive (src/directives/batch-directives.ts): its existence says the
   * batch is cancelled, or paused. Batch ids may hold dots: the name is read back by its head.
   */
  batchMarker(directive: 'cancelled' | 'paused', batch: string): string {
    return flagName(this.prefix, { kind: directive === 'cancelled' ? 'batch-cancelled' : 'batch-paused', batch });
  }
  /**
   * Exclusive queue whose existence is the lock of the administrative reads
   * that hold messages (src/broker/read-lock.ts): held by one connection at a time, gone with it.
   */
  get readLock(): string {
    return flagName(this.prefix, { kind: 'read-lock' });
  }
  /**
   * Exclusive queue held by the one process that advances workflows and publishes their steps
   * (src/workflow/advancer-lock.ts): taken by one connection at a time, gone with it.
   */
  get workflowLock(): string {
    return `${this.prefix}.workflow-lock`;
  }
  /** Marker exchange of a paused tenant: every job of the tenant is parked at every stage. */
  tenantPauseMarker(tenant: string): string {
    return flagName(this.prefix, { kind: 'tenant-paused', tenant });
  }
}

/**
 * Words joined into a broker name, which must fit RabbitMQ's 255 bytes: a long queue name under a
 * long prefix, tenant and variant may not.
 * @throws StagecoachError `INVALID_REQUEST` naming the name and the limit.
 */
function brokerName(parts: ReadonlyArray<string | undefined>): string {
  const name = parts.filter((part) => part !== undefined).join('.');
  const bytes = Buffer.byteLength(name);
  if (bytes > MAX_BROKER_NAME_BYTES) {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `the broker name "${name.slice(0, 80)}..." would be ${bytes} bytes, more than RabbitMQ's ${MAX_BROKER_NAME_BYTES}: use a shorter queue name (or prefix)`,
    );
  }
  return name;
}

/** The names of a configuration's prefix, made once per configuration: routing asks for every job. */
export function brokerNamesOf(config: { readonly prefix: string }): BrokerNames {
  let names = namesByConfig.get(config);
  if (names === undefined) namesByConfig.set(config, (names = new BrokerNames(config.prefix)));
  return names;
}

const namesByConfig = new WeakMap<object, BrokerNames>();

/** The park exchange's routing key for a job's tenant: tenants are slugs, so `_` names none. */
export function parkKey(tenant: string | undefined): string {
  return tenant ?? '_';
}

/** What a broker name under a prefix is, read back from its parts (see `parseBrokerName`). */
export interface ParsedBrokerName {
  /** The second word: `queue`, `due`, `suspect`, `dead`, `tenant`, `variants`, `general`, `state`, `delay`... */
  kind: string;
  /** The logical queue, for the kinds that have one. */
  queue?: string;
  tenant?: string;
  variant?: string;
}

/** Kinds whose names read `<prefix>.<kind>.<queue>[.<tenant>[.<variant>]]`. */
const QUEUE_KINDS = new Set(['queue', 'due', 'suspect', 'dead', 'variants', 'general', 'state']);

/**
 * Reads a name back into its parts, or undefined for a name not under `prefix`. Prefixes, queue
 * words (queueWord), tenants and variants have no dots, so the reading is unique.
 */
export function parseBrokerName(prefix: string, name: string): ParsedBrokerName | undefined {
  if (!name.startsWith(`${prefix}.`)) return undefined;
  const [kind, ...rest] = name.slice(prefix.length + 1).split('.');
  if (kind === 'tenant' && rest.length === 1) return { kind, tenant: rest[0] };
  // A state marker names its queue after the state: `<prefix>.state.paused.<queue>[.<tenant>[.<variant>]]`.
  if (kind === 'state' && (rest[0] === 'paused' || rest[0] === 'draining')) rest.shift();
  if (!QUEUE_KINDS.has(kind) || rest.length === 0 || rest.length > 3) return { kind };
  const [queue, tenant, variant] = rest;
  return {
    kind,
    queue: queueOfWord(queue as string),
    ...(tenant === undefined ? {} : { tenant }),
    ...(variant === undefined ? {} : { variant }),
  };
}
