/**
 * The OJS events administration emits (OJS queue configuration 10.1, docs/broker.md "Events"):
 * `queue.config_updated` when `apply`, `provision` or `dev` changes a queue's settings,
 * `tenant.provisioned` when `provision` or `apply` declares a tenant the broker did not have,
 * `queue.deleted` and `tenant.retired` when `queue delete` and `tenant retire` remove them.
 *
 * Every command takes an optional sink; the command line passes the events module's
 * (`EventPublisher.sink`, src/events), which publishes them on `<prefix>.events`. `data` names
 * the logical `queue` and the `tenant` where the event has them.
 */
export interface AdminEvent {
  type: 'queue.config_updated' | 'queue.deleted' | 'tenant.provisioned' | 'tenant.retired';
  data: Record<string, unknown>;
}

/** Where administration sends its events; resolves once the event is handed over. */
export type AdminEventSink = (event: AdminEvent) => Promise<void>;
