import type { CompiledConfig, CompiledPayloadStoreConfig } from '../config/config.types.js';
import { FsPayloadStore } from './fs-payload-store.js';
import type { PayloadStore } from './payload-store.js';
import { PostgresPayloadStore } from './postgres-payload-store.js';

/**
 * The payload store `payloads.store` configures: a {@link FsPayloadStore} on its directory (made
 * at the first payload, not here) or a {@link PostgresPayloadStore} on its table (made at first
 * use). Neither touches the disk or the database before it is used; the caller closes it.
 *
 * @param config the compiled configuration, or its `payloads.store`.
 */
export function createPayloadStore(config: CompiledConfig | CompiledPayloadStoreConfig): PayloadStore {
  const store = 'payloads' in config ? config.payloads.store : config;
  switch (store.kind) {
    case 'fs':
      return new FsPayloadStore(store.dir);
    case 'postgres':
      return new PostgresPayloadStore(store.url, { table: store.table, max: store.pool_size });
  }
}
