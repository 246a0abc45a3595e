/**
 * Helpers for testing stages: `StageHarness` runs a stage in memory; `withTestConfig`,
 * `purge` and `teardown` give integration tests their own prefix on a real broker.
 */
export { StageHarness, type EmittedJob, type HarnessResult } from './stage-harness.js';
export { withTestConfig, teardown, purge } from './test-config.js';
export { deletePrefix } from './delete-prefix.js';
