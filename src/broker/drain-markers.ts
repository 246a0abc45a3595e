import type { ManagementApi } from '../security/management-api.js';
import type { AmqpConnection } from './amqp-connection.js';
import { ExchangeProbe } from './exchange-probe.js';

/**
 * How `declareTopology` learns which drain markers (src/state/queue-state.ts) exist. Either way
 * the answer must reflect every marker created before the question was asked: the race argument
 * in declare-topology.ts depends on it.
 */
export interface DrainMarkers {
  /** The subset of `markers` (exchange names) that exist on the broker now. */
  present(markers: readonly string[]): Promise<Set<string>>;
  /** Releases what the source holds (a channel). */
  close(): Promise<void>;
}

/**
 * One passive declare per marker, on a channel of its own: needs no permission and no management
 * access, so it is what stages use. Costs a round trip per marker (and a fresh channel after each
 * missing one, since the broker's 404 closes the channel): right for a stage's one or two entries,
 * slow for thousands.
 */
export class ProbedDrainMarkers implements DrainMarkers {
  private readonly probe: ExchangeProbe;

  constructor(connection: AmqpConnection) {
    this.probe = new ExchangeProbe(connection);
  }

  async present(markers: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const marker of markers) if (await this.probe.exists(marker)) found.add(marker);
    return found;
  }

  close(): Promise<void> {
    return this.probe.close();
  }
}

/**
 * One listing of the virtual host's exchanges through the management API per question, however
 * many markers are asked about: what `provision` uses (the operator has management access).
 *
 * The listing reads the broker's exchange table itself (`rabbit_exchange:info_all`), not the
 * statistics database, which lags: an exchange whose declare-ok was sent before the GET is in it.
 */
export class ListedDrainMarkers implements DrainMarkers {
  constructor(
    private readonly api: ManagementApi,
    private readonly vhost: string,
  ) {}

  async present(markers: readonly string[]): Promise<Set<string>> {
    if (markers.length === 0) return new Set();
    const wanted = new Set(markers);
    return new Set((await this.api.listExchangeNames(this.vhost)).filter((name) => wanted.has(name)));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
