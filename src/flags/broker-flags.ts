import type { ChannelModel } from 'amqplib';
import { FlagChannel, type HoldOutcome } from './flag-channel.js';
import { flagName, flagObject, type Flag, type HeldFlag, type MarkerFlag } from './flag.js';
import type { FlagReader } from './flag-reader.js';

/** Where flags live: the prefix of their names and, for setting markers, the durability of the topology. */
export interface FlagScope {
  prefix: string;
  /** Markers are durable like the queues, so that they hold across broker restarts. @defaultValue true */
  durable?: boolean;
}

/**
 * The one read/write API of broker flags (flag.ts) on a connection: what queue states, batch and
 * tenant directives, the read lock and the tenant checks use instead of declares and deletes of
 * their own. Close it when done (its channel; the connection stays the caller's).
 */
export class BrokerFlags implements FlagReader {
  private readonly channel: FlagChannel;

  constructor(
    connection: ChannelModel,
    readonly scope: FlagScope,
  ) {
    this.channel = new FlagChannel(connection);
  }

  /** The flag's name on the broker. */
  name(flag: Flag): string {
    return flagName(this.scope.prefix, flag);
  }

  /** Sets a marker (idempotent). */
  set(flag: MarkerFlag): Promise<void> {
    return this.channel.declareMarker(this.name(flag), this.scope.durable ?? true);
  }

  /** Clears a marker (idempotent). */
  clear(flag: MarkerFlag): Promise<void> {
    return this.channel.deleteMarker(this.name(flag));
  }

  /**
   * Whether a flag is set now (the read lock: held by any connection). False only for the
   * broker's 404: any other failure is thrown, since it says nothing about the flag.
   */
  isSet(flag: Flag): Promise<boolean> {
    const name = this.name(flag);
    return flagObject(flag) === 'queue' ? this.channel.queueExists(name) : this.channel.exchangeExists(name);
  }

  /** Which of these flags' names are set now (FlagReader). */
  present(names: readonly string[]): Promise<Set<string>> {
    return this.channel.present(names);
  }

  /** Tries once to hold the read lock for this connection's lifetime (see FlagChannel.holdExclusive). */
  hold(flag: HeldFlag): Promise<HoldOutcome> {
    return this.channel.holdExclusive(this.name(flag));
  }

  close(): Promise<void> {
    return this.channel.close();
  }
}
