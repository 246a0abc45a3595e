import { createRequire } from 'node:module';
import type { Channel } from 'amqplib';

/** amqplib's frame definitions: its promise API has no `tx.*` methods, its channels can send them. */
const defs = createRequire(import.meta.url)('amqplib/lib/defs.js') as Record<string, unknown>;

interface RpcChannel {
  rpc(method: unknown, fields: Record<string, unknown>, expect: unknown): Promise<unknown>;
}

/**
 * Puts a channel in AMQP transaction mode (`tx.select`): from then on its publishes and
 * acknowledgements take effect together at each {@link commit}, or not at all when the channel
 * or its process dies first. Used where two queues must change together (a token and its ledger
 * entry, src/flow/bucket-keeper.ts); a channel in this mode cannot also use publisher confirms.
 */
export async function selectTx(channel: Channel): Promise<void> {
  await (channel as unknown as RpcChannel).rpc(defs.TxSelect, {}, defs.TxSelectOk);
}

/** `tx.commit`: everything sent on the channel since the last commit takes effect, together. */
export async function commit(channel: Channel): Promise<void> {
  await (channel as unknown as RpcChannel).rpc(defs.TxCommit, {}, defs.TxCommitOk);
}

/** `tx.rollback`: everything sent on the channel since the last commit is dropped. */
export async function rollback(channel: Channel): Promise<void> {
  await (channel as unknown as RpcChannel).rpc(defs.TxRollback, {}, defs.TxRollbackOk);
}
