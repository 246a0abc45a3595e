import type { AdminContext } from '../admin-context.js';
import { Publisher } from '../../publisher/publisher.js';
import { ClaimBoard } from './claim-board.js';
import { EnvelopeCache } from './envelope-cache.js';
import { RemoteStages } from './remote-stages.js';
import { RetryTimes } from './retry-times.js';
import { SettlementWaits } from './settlement-waits.js';
import { EventLog } from './event-log.js';
import { ProgressBoard } from './job-progress.js';
import { WorkerDirectory } from './worker-directory.js';
import { EventPublisher } from '../../events/event-publisher.js';
import type { EventSink } from '../../events/job-events.js';
import { KeyedSerializer } from '../../util/keyed-serializer.js';
import { PickerCache } from '../../queue-pools/picker-cache.js';
import { WebhookDispatcher } from '../../webhooks/webhook-dispatcher.js';
import type { WebhookDeliveryOptions } from '../../webhooks/webhook-queue.js';

/** What the binding's handlers work with beside the admin API's context. */
export interface BindingContext {
  admin: AdminContext;
  /** The envelopes pushed through this server (INFO shows their arguments). */
  envelopes: EnvelopeCache;
  /** One publisher for the server's life, of the configuration as it was at the first push. */
  publisher(): Promise<Publisher>;
  /** The jobs held for HTTP workers, waiting or claimed. */
  board: ClaimBoard;
  /** The runners of the queues HTTP workers fetch from. */
  remote: RemoteStages;
  /** When the retries those runners scheduled come back. */
  retries: RetryTimes;
  /** The progress HTTP workers reported for the jobs they hold. */
  progress: ProgressBoard;
  /** Those runners' settlements, as they happen: what an ack, nack or cancel answers. */
  settlements: SettlementWaits;
  /** The HTTP workers seen, and the state operators want of each. */
  workers: WorkerDirectory;
  /** The events of the prefix this server has read (`GET /ojs/v1/events`). */
  events: EventLog;
  /** Publishes the binding's OJS events (`job.enqueued`; the remote stages' `job.*`) to `<prefix>.events`. */
  publishEvent: EventSink;
  /** `--test-reset`: `POST /ojs/v1/admin/reset` is served. */
  testReset: boolean;
  /** Delivers the events read to the webhook subscriptions (docs/webhooks.md). */
  webhooks: WebhookDispatcher;
  /** Pushes of one derived job id, one at a time (push-handlers.ts); webhook subscription changes likewise. */
  pushing: KeyedSerializer;
  /** The turns of fetches over several queues by a strategy (fetch-plan.ts). */
  pickers: PickerCache;
  close(): Promise<void>;
}

export function createBindingContext(
  admin: AdminContext,
  options: { testReset: boolean; queuesPerTenant?: number; webhooks?: WebhookDeliveryOptions },
): BindingContext {
  let opened: Promise<Publisher> | undefined;
  const board = new ClaimBoard();
  const retries = new RetryTimes();
  const settlements = new SettlementWaits(retries);
  const events = new EventLog(() => admin.configFile.load(), admin.log);
  const webhooks = new WebhookDispatcher(() => events.listen(), admin.log, {
    ...options.webhooks,
    allowPrivateAddresses: async () => (await admin.configFile.load()).webhooks.allowPrivateAddresses,
  });
  events.onEvent((event) => webhooks.offer(event));
  admin.schedules.onBook((book) => webhooks.follow(book));
  webhooks.start();
  let eventPublisher: Promise<EventPublisher> | undefined;
  const publishEvent: EventSink = (type, subject, data) => {
    eventPublisher ??= admin.configFile
      .load()
      .then((config) => new EventPublisher(config, { source: 'stagecoach/http-binding', log: admin.log }));
    eventPublisher.catch(() => (eventPublisher = undefined));
    return eventPublisher.then((publisher) => publisher.publish(type, subject, data)).catch(() => undefined);
  };
  const remote = new RemoteStages(() => admin.configFile.load(), board, admin.log, [settlements], publishEvent, options.queuesPerTenant);
  return {
    admin,
    envelopes: new EnvelopeCache(),
    board,
    remote,
    retries,
    settlements,
    workers: new WorkerDirectory(),
    progress: new ProgressBoard(),
    events,
    publishEvent,
    webhooks,
    testReset: options.testReset,
    pushing: new KeyedSerializer(),
    pickers: new PickerCache(),
    publisher(): Promise<Publisher> {
      opened ??= admin.configFile.load().then((config) => Publisher.connect(config, { log: admin.log, source: 'stagecoach/http-binding' }));
      // A failed connect is not kept: the next push tries again.
      opened.catch(() => (opened = undefined));
      return opened;
    },
    async close(): Promise<void> {
      webhooks.close();
      await remote.close();
      await events.close();
      const publisher = await opened?.catch(() => undefined);
      await publisher?.close();
      await (await eventPublisher?.catch(() => undefined))?.close();
    },
  };
}
