import { batchState, type BatchFold } from '../../batch/batch-fold.js';
import { batchView } from '../../batch/batch-views.js';
import { readTracking, Tracker } from '../../tracker/tracker.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { checkBatchId } from '../../util/batch-id.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';
import { untilSignal } from '../signals.js';
import { payloadOffloaderFor } from '../../payload/payload-offloader.js';
import { WorkflowAdvancer } from '../../workflow/workflow-advancer.js';

/**
 * `stagecoach tracker`: replays the tracking stream, then follows it, announces completed batches
 * and advances workflows (while it holds the workflow lock: docs/workflows.md) until SIGTERM/SIGINT.
 */
export async function tracker(opts: { config?: string }): Promise<number> {
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command: 'tracker' });
  const signal = untilSignal();
  const payloads = payloadOffloaderFor(config, log);
  const running = await Tracker.start(config, { log, plugins: [WorkflowAdvancer.plugin({ config, log, payloads })] });
  try {
    await signal.promise;
  } finally {
    signal.dispose();
    await running.close();
    await payloads.store.close();
  }
  return EXIT_OK;
}

/** `stagecoach batch status <B> [--json]` (read from the stream: no tracker needed). */
export async function batchStatus(id: string, opts: { json?: boolean; config?: string }): Promise<number> {
  checkBatchId(id, 'batch');
  const fold = await read(opts.config);
  const batch = fold.batch(id);
  if (batch === undefined) throw new StagecoachError('NOT_FOUND', `no report names batch "${id}" (the stream keeps tracking.max_age)`);
  const view = batchView(batch);
  if (opts.json) process.stdout.write(`${JSON.stringify(view)}\n`);
  else {
    const c = batch.counts;
    process.stdout.write(
      `batch ${batch.id} (tenant ${batch.tenant ?? '-'}): ${view.state as string}\n` +
        `  known ${c.known}, completed ${c.completed}, failed ${c.failed} (dead ${c.dead}, discarded ${c.discarded}), cancelled ${c.cancelled}, in flight ${c.in_flight}${batch.paused ? ' (paused)' : ''}\n`,
    );
  }
  return EXIT_OK;
}

/** `stagecoach batch list [--tenant T] [--json]` */
export async function batchList(opts: { tenant?: string; json?: boolean; config?: string }): Promise<number> {
  const tenant = opts.tenant === undefined ? undefined : resolveTenant(opts.tenant);
  const fold = await read(opts.config);
  const batches = [...fold.batches.values()].filter((batch) => tenant === undefined || batch.tenant === tenant);
  if (opts.json) process.stdout.write(`${JSON.stringify(batches.map(batchView))}\n`);
  else {
    for (const batch of batches) {
      const c = batch.counts;
      process.stdout.write(
        `${batch.id}\t${batch.tenant ?? '-'}\t${batchState(batch)}\t${c.completed}/${c.known} done\t${c.failed} failed\t${c.in_flight} in flight\n`,
      );
    }
    process.stdout.write(`${batches.length} batch${batches.length === 1 ? '' : 'es'}\n`);
  }
  return EXIT_OK;
}

async function read(configFile: string | undefined): Promise<BatchFold> {
  const config = await loadConfig(configFile);
  return readTracking(config, createLogger({ service: 'stagecoach', command: 'batch' }));
}
