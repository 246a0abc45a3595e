import type { FlowControl } from '../../flow/flow-control.js';
import type { LimitScope } from '../../flow/limit-resolver.js';
import type { DispatcherOptions } from './dispatcher.js';
import type { Settlement } from '../settle/settlement.js';

/**
 * What a runner's dispatcher takes from flow control (docs/flow-control.md): the permit each
 * delivery needs, and the settlement of one whose own policy does not wait. Nothing without it.
 */
export function flowIntake(
  flow: FlowControl | undefined,
  scope: LimitScope,
  settlement: () => Settlement,
): Pick<DispatcherOptions, 'admit' | 'limited'> {
  if (flow === undefined) return {};
  return {
    admit: flow.admission(scope),
    limited: (delivery, action, waitMs) => settlement().limitReached(delivery, action, waitMs, flow),
  };
}
