/**
 * The OJS events administration emits (seeds/001 section 10, DESIGN.md `ojs.events`):
 * `queue.config_updated` when `apply` or `provision` changes a queue's settings, `queue.deleted`
 * and `tenant.retired` when `queue delete` and `tenant retire` remove them.
 *
 * HOOK: publishing them on `<prefix>.events` belongs to the events module (src/events,
 * `publishEvent`), built beside this change. Until it is wired in, every command takes an
 * optional sink and the command line passes none: the commands log what happened instead.
 */
export interface AdminEvent {
  type: 'queue.config_updated' | 'queue.deleted' | 'tenant.retired';
  data: Record<string, unknown>;
}

/** Where administration sends its events; resolves once the event is handed over. */
export type AdminEventSink = (event: AdminEvent) => Promise<void>;
