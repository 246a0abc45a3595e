import type { CompiledConfig } from '../../config/config.types.js';
import { loadConfig } from '../../config/load-config.js';
import { createPayloadStore } from '../../payload/create-payload-store.js';
import { NO_TENANT } from '../../payload/payload-key.js';
import type { PayloadStore } from '../../payload/payload-store.js';
import { sweepPayloads } from '../../payload/payload-sweeper.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/**
 * `stagecoach payloads sweep [--json] [--config F]`: one sweep of the configured payload store
 * (docs/payloads.md): payloads still pending after `payloads.orphan_after` (their publisher died
 * before the broker had the job) and any payload after `payloads.retention`. Prints how many it
 * deleted. `stagecoach admin` sweeps periodically; a deployment without it runs this from cron or
 * a Kubernetes CronJob. Safe beside other sweepers of the same store.
 */
export async function payloadsSweep(opts: { json?: boolean; config?: string }): Promise<number> {
  const config = await loadConfig(opts.config);
  const result = await withStore(config, (store) => sweepPayloads(store, config.payloads));
  createLogger({ service: 'stagecoach', command: 'payloads sweep' }).info('payloads swept', { ...result });
  process.stdout.write(opts.json === true ? `${JSON.stringify(result, null, 2)}\n` : `swept ${result.swept}\n`);
  return EXIT_OK;
}

/**
 * `stagecoach payloads count [--tenant T] [--json] [--config F]`: how many payloads the store
 * holds, pending and committed, of one tenant (`_`: jobs without a tenant) or of all.
 */
export async function payloadsCount(opts: { tenant?: string; json?: boolean; config?: string }): Promise<number> {
  const tenant = opts.tenant === NO_TENANT ? NO_TENANT : resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const count = await withStore(config, (store) => store.count(tenant));
  process.stdout.write(
    opts.json === true ? `${JSON.stringify({ ...(tenant === undefined ? {} : { tenant }), count }, null, 2)}\n` : `${count}\n`,
  );
  return EXIT_OK;
}

async function withStore<T>(config: CompiledConfig, action: (store: PayloadStore) => Promise<T>): Promise<T> {
  const store = createPayloadStore(config);
  try {
    return await action(store);
  } finally {
    await store.close();
  }
}
