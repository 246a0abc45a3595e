import type { Options } from 'amqplib';
import type { CompiledConfig } from '../../config/config.types.js';
import type { BrokerNames } from '../../topology/names.js';
import type { DeadLetterOrigin } from './dead-letters.js';

import type { RouteResult } from './settlement-result.js';

export type { Settled } from './settlement-result.js';

/** One message a route publishes in place of the delivery, before the delivery is acknowledged. */
export interface RouteMessage {
  exchange: string;
  routingKey: string;
  content: Buffer;
  options: Options.Publish;
}

/**
 * What a route does when the broker refuses its message (refused, not lost: a lost channel is
 * always tried again on the healed publisher, see ConfirmLoop):
 * - `reject`: the delivery is refused to its queue's dead-letter route (`dead list` reads the
 *   reason from `x-death`); a batched job's report, if already confirmed, is followed by `dead`;
 * - `fallback`: the other route, built when needed, is taken instead (a full `dead_letter_queue`: the dead letters of
 *   the job's own queue);
 * - `wait`: published again after each of the settlement's waits (a queue that cannot be full,
 *   such as `due` or `suspect`, refuses only while it has no leader), then `reject`, a confirmed
 *   report followed by `dead` as for `reject`.
 */
export type Refusal = { kind: 'reject' } | { kind: 'fallback'; route: () => Route } | { kind: 'wait' };

/**
 * A settlement route: built by a pure builder (settlement-route-builders.ts) from the delivery and its
 * outcome, carried out by the ConfirmLoop. `message` absent: nothing replaces the delivery
 * (discard, cancel), it is only acknowledged.
 */
export interface Route {
  /** How logs name it ("retry", "dead letter"...). A label only: the route's behaviour is in `refusal`. */
  what: string;
  message: RouteMessage | undefined;
  refusal: Refusal;
  /** What it comes to once carried out (AfterSettle, BatchReports). */
  result: RouteResult;
  /** Why the route is not the one asked for (a `dead_letter_queue` that cannot take the job): logged. */
  detour?: { reason: string; target: string };
  /**
   * Made sure of before each publish of `message`: its queue exists (a suspect queue declared on
   * first use, SuspectDeclaration). A failure is handled as a refusal of the message.
   */
  prepare?: () => Promise<void>;
}

/** What the route builders read: the stage, its queues and names, fixed for the settlement's life. */
export interface RouteContext {
  config: CompiledConfig;
  names: BrokerNames;
  stage: string;
  /** The instance's own queues: retries and hand-backs return there, crashes go to `suspect`. */
  queues: { due: string; suspect: string; dead: string };
  origin: DeadLetterOrigin;
  /** Declares the suspect queue before a job is moved there, when it is declared on first use (SuspectDeclaration). */
  ensureSuspect?: () => Promise<void>;
}
