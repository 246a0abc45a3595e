/**
 * The PayloadStore contract suite. It lives in src/testing so that users run it against their own
 * stores (`import { describeStoreContract } from 'stagecoach/testing'`); the tests import it here.
 */
export { describeStoreContract, type StoreContractOptions } from '../../src/testing/payload-store-contract.js';
