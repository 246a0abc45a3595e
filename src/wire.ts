/**
 * `stagecoach/wire`: for tools that speak to stagecoach over RabbitMQ without it, and for
 * whoever reads its broker objects: how a job travels as an AMQP message (OJS envelope,
 * `x-ojs-*` headers), the broker's names, the topology stagecoach declares (exchanges, queues,
 * bindings, policies, the delay ladder, queue arguments), OJS events, tracking records and batch
 * callback ids. The Open Job Spec (github.com/openjobspec/spec) and docs/broker.md describe it.
 * Stage authors and library users need none of it: see the root entry, `stagecoach`.
 */

// Jobs as AMQP messages.
export { parseEnvelope, JOB_CONTENT_TYPE, SPEC_VERSION } from './job/envelope.js';
export { toWire, fromWire, OJS_HEADERS } from './job/amqp-mapping.js';

// Broker names and topology.
export { BrokerNames } from './topology/names.js';
export type { Topology, ExchangeSpec, QueueSpec, BindingSpec, PolicySpec } from './topology/topology.types.js';
export {
  coreTopology,
  provisionTopology,
  queueTopology,
  stageDeclaredTopology,
  stageTopology,
  tenantTopology,
} from './topology/build-topology.js';
export { declareTopology, declareTopologyOnce } from './broker/declare-topology.js';
export { queuePolicies } from './topology/queue-policies.js';
export { DELAY_LEVELS, MAX_DELAY_SECONDS, delayTopology } from './topology/delay-topology.js';
export { queueTypeArguments, sharedQueueType } from './topology/queue-type.js';

// OJS events.
export { createEvent, EVENT_TYPES, EVENT_SPEC_VERSION, EVENT_CONTENT_TYPE, type EventType, type OjsEvent } from './events/ojs-event.js';

// Tracking records and batch callbacks.
export type {
  SettledReport,
  CreatedReport,
  AnnouncedReport,
  TrackingRecord,
  SettlementOutcome,
} from './tracking-stream/tracking-report.js';
export { CALLBACK_NAMES, callbackJobId, callbacksToRun, checkCallbacks, type CallbackMeta } from './batch/batch-callbacks.js';
