import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { declareTopology } from '../../broker/declare-topology.js';
import type { Logger } from '../../logging/logger.js';
import type { Topology } from '../../topology/topology.types.js';

export interface SuspectDeclarationOptions {
  /** The runner's suspect part (suspectPart of its topology): the queue and its binding from the delay ladder. */
  topology: Topology;
  /** Its suspect queue, for log lines. */
  queue: string;
  log: Logger;
  /** @defaultValue declareTopology (a unit test passes a stub) */
  declare?: (connection: AmqpConnection, topology: Topology, log?: Logger) => Promise<void>;
}

/**
 * A pooled runner's suspect queue, declared on first use rather than at start (`run
 * --all-tenants`, for a tenant found provisioned: PooledRoster). Only the stage that reads the
 * queue writes it, by moving there a job redelivered after a crash (suspectRoute): declared
 * before that move, it exists whenever a job is in it, and the 10,000 tenants of a process that
 * never crash cost no 20,000 declarations at each start.
 *
 * Declared once per connection (a memoized promise, forgotten when the connection changes: a
 * queue deleted meanwhile comes back); a failed declaration is forgotten too, logged, and thrown
 * to the ConfirmLoop, which handles it as a refusal of the move (the delivery stays unacked, and
 * is moved again after a wait, declaring again; see settlement-route.types.ts, Refusal).
 *
 * Lifecycle: `attach(connection)` at every attach of the runner, `detach()` when the connection
 * is gone, `ensure()` before each move to the suspect queue (Route.prepare).
 */
export class SuspectDeclaration {
  private connection: AmqpConnection | undefined;
  private declared: Promise<void> | undefined;

  constructor(private readonly options: SuspectDeclarationOptions) {}

  attach(connection: AmqpConnection): void {
    if (connection === this.connection) return;
    this.connection = connection;
    this.declared = undefined;
  }

  detach(): void {
    this.connection = undefined;
    this.declared = undefined;
  }

  /** Resolves once the suspect queue and its binding are declared on the current connection. */
  ensure(): Promise<void> {
    if (this.declared !== undefined) return this.declared;
    const { connection } = this;
    const { queue, log } = this.options;
    if (connection === undefined) return Promise.reject(new Error(`suspect queue "${queue}" not declared: no connection`));
    const declare = this.options.declare ?? declareTopology;
    const declaring: Promise<void> = declare(connection, this.options.topology, log).catch((err: unknown) => {
      if (this.declared === declaring) this.declared = undefined;
      log.error('suspect queue not declared; the redelivered job is not moved there yet', { queue, err: (err as Error).message });
      throw err;
    });
    this.declared = declaring;
    return declaring;
  }
}
