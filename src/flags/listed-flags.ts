import { flagsIn, type FlagKind, type FlagOf } from './flag.js';
import type { FlagReader } from './flag-reader.js';

/** What ListedFlags needs of the management API (ManagementClient has it). */
export interface ExchangeLister {
  listExchangeNames(vhost: string): Promise<string[]>;
}

/**
 * Reads flags from one listing of the virtual host's exchanges through the management API per
 * question, however many flags are asked about: for `provision` and pooled stages, which have
 * management access and may ask about thousands of drain flags at once.
 *
 * The listing reads the broker's exchange table itself (`rabbit_exchange:info_all`), not the
 * statistics database, which lags: an exchange whose declare-ok was sent before the request is
 * in it, as FlagReader requires. The read lock is a queue, never in this listing.
 */
export class ListedFlags implements FlagReader {
  constructor(
    private readonly api: ExchangeLister,
    private readonly vhost: string,
  ) {}

  async present(names: readonly string[]): Promise<Set<string>> {
    if (names.length === 0) return new Set();
    const wanted = new Set(names);
    return new Set((await this.api.listExchangeNames(this.vhost)).filter((name) => wanted.has(name)));
  }

  /** Every flag of the given kinds set under `prefix` now. */
  async list<K extends FlagKind>(prefix: string, kinds: readonly K[]): Promise<Array<FlagOf<K>>> {
    return flagsIn(prefix, await this.api.listExchangeNames(this.vhost), kinds);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
