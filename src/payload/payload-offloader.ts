import { randomUUID } from 'node:crypto';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { InvalidPayloadError, PayloadMissingError } from '../errors/errors.js';
import { OJS_HEADERS, toWire, type WireMessage, type WireOptions } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import { formatPayloadRef, parsePayloadRef, payloadTenant } from './payload-ref.js';
import { createPayloadStore } from './create-payload-store.js';
import type { PayloadKey, PayloadStore } from './payload-store.js';

export interface PayloadOffloaderOptions {
  store: PayloadStore;
  /** Bytes of the encoded job above which a job for this logical queue travels by reference. */
  thresholdFor(queue: string): number;
  log: Logger;
}

/** Tries of a commit the store refused, a growing wait apart, before it is left to the log. */
const COMMIT_TRIES = 5;

/**
 * Payload offloading (docs/payloads.md), in the three places a job's arguments pass:
 * - **sending** (`JobRouter`: every emit and publish): a job whose encoded envelope is above its
 *   queue's threshold is sent with no `args` and the header `x-ojs-payload-ref: <tenant>/<id>`;
 *   its serialized `args` (JSON) are stored first, `pending`, and committed once the broker
 *   confirmed the job. A job below the threshold costs one length comparison.
 * - **receiving** (`DeliveryProcessor`): the arguments are loaded back before the handler runs,
 *   only from the tenant whose queue the job came from; a payload that is gone is
 *   `PAYLOAD_MISSING` (dead-lettered, never retried).
 * - **settling** (`Settlement`): deleted once no job that references it can run again: after its
 *   job completed, was discarded or cancelled, and was acknowledged. Retries, suspects, hand-backs,
 *   parked jobs and dead letters are copies of the same message, with the same reference: the
 *   payload stays.
 */
export class PayloadOffloader {
  constructor(private readonly options: PayloadOffloaderOptions) {}

  get store(): PayloadStore {
    return this.options.store;
  }

  /** Whether a job of `queue` encoded in `bytes` goes by reference. */
  exceeds(queue: string, bytes: number): boolean {
    return bytes > this.options.thresholdFor(queue);
  }

  /**
   * Stores the job's arguments, publishes it without them (`publish` routes and confirms), then
   * commits the payload. A publish that fails deletes the payload again (best effort: a crash
   * leaves an orphan, `pending`, that the sweep deletes after `payloads.orphan_after`).
   */
  async send(job: Job, wire: WireOptions, publish: (message: WireMessage) => Promise<void>): Promise<void> {
    const key: PayloadKey = { tenant: payloadTenant(job.tenant), id: randomUUID() };
    const data = Buffer.from(JSON.stringify(job.args));
    await this.options.store.put(key, data);
    const slim = toWire(
      { ...job, args: [] },
      { ...wire, headers: { ...wire.headers, [OJS_HEADERS.payloadRef]: formatPayloadRef(key), [OJS_HEADERS.payloadSize]: data.length } },
    );
    try {
      await publish(slim);
    } catch (err) {
      await this.options.store.delete(key).catch(() => undefined);
      throw err;
    }
    await this.commit(key);
  }

  /**
   * The job's arguments when they travelled by reference, else undefined (no header: inline).
   * @param tenant the tenant whose payloads the reader may load: the queue's, or for a shared
   *   queue the tenant the (admitted) job claims.
   * @throws InvalidPayloadError for a malformed reference or one of another tenant;
   *   PayloadMissingError when the store has nothing under it; the store's own error when it
   *   cannot answer (a failure like any other: retried).
   */
  async load(headers: Readonly<Record<string, unknown>>, tenant: string | undefined, queue: string): Promise<unknown[] | undefined> {
    const value = headers[OJS_HEADERS.payloadRef];
    if (value === undefined) return undefined;
    return this.loadArray(value, tenant, queue, 'arguments');
  }

  /**
   * A workflow step's `parent_results` that travelled by reference (`meta.parent_results_ref`,
   * docs/workflows.md), under the same rules as arguments: only the reader's tenant's, and
   * PAYLOAD_MISSING when they are gone.
   */
  loadParentResults(ref: unknown, tenant: string | undefined, queue: string): Promise<unknown[]> {
    return this.loadArray(ref, tenant, queue, 'parent results');
  }

  private async loadArray(value: unknown, tenant: string | undefined, queue: string, what: string): Promise<unknown[]> {
    const key = parsePayloadRef(value);
    if (key.tenant !== payloadTenant(tenant)) {
      throw new InvalidPayloadError(
        `x-ojs-payload-ref names a payload of ${key.tenant === '_' ? 'no tenant' : `tenant "${key.tenant}"`}; this job may read ${tenant === undefined ? 'payloads without a tenant' : `tenant "${tenant}"`}'s only`,
        queue,
      );
    }
    const data = await this.options.store.get(key);
    if (data === undefined) throw new PayloadMissingError(formatPayloadRef(key), tenant, queue);
    let parsed: unknown;
    try {
      parsed = JSON.parse(data.toString('utf8'));
    } catch (err) {
      throw new InvalidPayloadError(`the payload ${formatPayloadRef(key)} is not JSON: ${(err as Error).message}`, queue);
    }
    if (!Array.isArray(parsed)) throw new InvalidPayloadError(`the payload ${formatPayloadRef(key)} is not a JSON array of ${what}`, queue);
    return parsed;
  }

  /**
   * Deletes the payload of a delivery that no job can run again (see the class comment); in the
   * background: a failure (or a crash first) leaves it to the sweep after `payloads.retention`.
   */
  release(headers: Readonly<Record<string, unknown>> | undefined): void {
    const value = headers?.[OJS_HEADERS.payloadRef];
    if (value === undefined) return;
    let key: PayloadKey;
    try {
      key = parsePayloadRef(value);
    } catch {
      return;
    }
    this.options.store
      .delete(key)
      .catch((err: unknown) =>
        this.options.log.warn('payload not deleted; the sweep will', { payload: formatPayloadRef(key), err: (err as Error).message }),
      );
  }

  /**
   * A commit the store refuses is tried again: the job is out, and a payload left `pending` would
   * be swept as an orphan after `payloads.orphan_after` while its job may still wait.
   */
  private async commit(key: PayloadKey): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.options.store.commit(key);
        return;
      } catch (err) {
        if (attempt >= COMMIT_TRIES) {
          this.options.log.error('payload not committed: it will be swept as an orphan after payloads.orphan_after', {
            payload: formatPayloadRef(key),
            err: (err as Error).message,
          });
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
  }
}

/**
 * The offloading a configuration asks for: its store (`payloads.store`, which the caller closes
 * with the offloader's `store.close()`) and each queue's `payload_threshold`.
 */
export function payloadOffloaderFor(
  config: CompiledConfig,
  log: Logger,
  store: PayloadStore = createPayloadStore(config),
): PayloadOffloader {
  return new PayloadOffloader({ store, thresholdFor: (queue) => queueFor(config, queue).payload_threshold, log });
}
