import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import type { HeaderValue } from '../../job/job.types.js';
import { createLogger } from '../../logging/logger.js';
import { Publisher } from '../../publisher/publisher.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/** `stagecoach publish <queue> --type X --args JSON [--tenant T] [--header k=v]...` */
export async function publish(
  queue: string,
  opts: { type: string; args: string; meta?: string; tenant?: string; header: string[]; config?: string },
): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const args = parseJson(opts.args, '--args');
  if (!Array.isArray(args)) throw new StagecoachError('INVALID_REQUEST', `--args must be a JSON array, got ${opts.args}`);
  const meta = opts.meta === undefined ? undefined : parseJson(opts.meta, '--meta');
  if (meta !== undefined && (typeof meta !== 'object' || meta === null || Array.isArray(meta))) {
    throw new StagecoachError('INVALID_REQUEST', `--meta must be a JSON object, got ${opts.meta}`);
  }
  const headers: Record<string, HeaderValue> = {};
  for (const pair of opts.header) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new StagecoachError('INVALID_REQUEST', `--header takes key=value, got "${pair}"`);
    headers[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const publisher = await Publisher.connect(config, { log: createLogger({ service: 'stagecoach', command: 'publish' }) });
  try {
    const id = await publisher.publish(queue, {
      type: opts.type,
      args,
      headers,
      ...(meta === undefined ? {} : { meta: meta as Record<string, unknown> }),
      ...(tenant === undefined ? {} : { tenant }),
    });
    process.stdout.write(`${id}\n`);
  } finally {
    await publisher.close();
  }
  return EXIT_OK;
}

function parseJson(text: string, option: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new StagecoachError('INVALID_REQUEST', `${option} is not JSON: ${(err as Error).message}`);
  }
}
