import type { AdminContext } from '../admin-context.js';
import { Publisher } from '../../publisher/publisher.js';
import { ClaimBoard } from './claim-board.js';
import { EnvelopeCache } from './envelope-cache.js';
import { RemoteStages } from './remote-stages.js';

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
  /** `--test-reset`: `POST /ojs/v1/admin/reset` is served. */
  testReset: boolean;
  close(): Promise<void>;
}

export function createBindingContext(admin: AdminContext, options: { testReset: boolean }): BindingContext {
  let opened: Promise<Publisher> | undefined;
  const board = new ClaimBoard();
  const remote = new RemoteStages(() => admin.configFile.load(), board, admin.log);
  return {
    admin,
    envelopes: new EnvelopeCache(),
    board,
    remote,
    testReset: options.testReset,
    publisher(): Promise<Publisher> {
      opened ??= admin.configFile.load().then((config) => Publisher.connect(config, { log: admin.log, source: 'stagecoach/http-binding' }));
      // A failed connect is not kept: the next push tries again.
      opened.catch(() => (opened = undefined));
      return opened;
    },
    async close(): Promise<void> {
      await remote.close();
      const publisher = await opened?.catch(() => undefined);
      await publisher?.close();
    },
  };
}
