/**
 * Helpers for testing stages: `StageHarness` runs a stage in memory; `withTestConfig`,
 * `purge` and `teardown` give integration tests their own prefix on a real broker;
 * `describeStoreContract` tests a payload store, stagecoach's or your own.
 */
export { StageHarness, type EmittedJob, type HarnessResult, type ProgressCall } from './stage-harness.js';
export { withTestConfig, teardown, purge } from './test-config.js';
export { deletePrefix } from './delete-prefix.js';
export { describeStoreContract, type ContractTestApi, type StoreContractOptions } from './payload-store-contract.js';
