import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ADMIN_TOKEN_ENV } from '../../http-api/bearer-auth.js';
import { DEFAULT_ADMIN_HOST, DEFAULT_ADMIN_PORT, startAdminServer } from '../../http-api/admin-server.js';
import type { RawConfig } from '../../config/config.types.js';
import { DEFAULT_CONFIG_PATH } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';
import { untilSignal } from '../signals.js';

/** The flags of `stagecoach admin`, as the command line parses them. */
export interface AdminOptions {
  port?: string;
  host?: string;
  config?: string;
  payloadSweep?: boolean;
  testReset?: boolean;
  auth?: boolean;
  scheduler?: boolean;
}

/**
 * `stagecoach admin [--port P] [--host H] [--no-payload-sweep] [--test-reset] [--no-auth] [--no-scheduler] [--config F]`:
 * the queue admin HTTP API and the OJS HTTP binding (docs/http-binding.md) until SIGTERM/SIGINT, then the requests under way finish and it exits 0. It also
 * sweeps the payload store periodically (PayloadSweeper) unless `--no-payload-sweep`, and runs a scheduler (docs/schedules.md) unless `--no-scheduler`. Port and host: the flags,
 * else `admin.port` / `admin.host` in the configuration, else 9500 on 127.0.0.1. The token comes
 * from the environment only (`STAGECOACH_ADMIN_TOKEN`): a file gets copied, logged and committed.
 */
export async function admin(opts: AdminOptions): Promise<number> {
  const port = opts.port === undefined ? undefined : parsePort(opts.port);
  if (opts.host !== undefined && opts.host.trim() === '') throw new StagecoachError('INVALID_REQUEST', '--host must not be empty');
  const file = path.resolve(opts.config ?? process.env.STAGECOACH_CONFIG ?? DEFAULT_CONFIG_PATH);
  const settings = await adminSettings(file);
  const log = createLogger({ service: 'stagecoach', command: 'admin' });
  const token = process.env[ADMIN_TOKEN_ENV];
  if (opts.auth === false) log.warn('--no-auth: requests without a token act as the admin; never in production');
  else if (token === undefined || token === '')
    log.warn(`${ADMIN_TOKEN_ENV} is not set: the admin API answers reads only and refuses every change`);
  const signal = untilSignal();
  const server = await startAdminServer({
    configFile: file,
    port: port ?? settings.port ?? DEFAULT_ADMIN_PORT,
    host: opts.host ?? settings.host ?? DEFAULT_ADMIN_HOST,
    token,
    log,
    payloadSweep: opts.payloadSweep !== false,
    testReset: opts.testReset === true,
    noAuth: opts.auth === false,
    scheduler: opts.scheduler !== false,
  });
  process.stdout.write(`stagecoach admin API on http://${server.host}:${server.port}/ojs/v1/queues\n`);
  process.stdout.write(`stagecoach OJS HTTP binding on http://${server.host}:${server.port}/ojs/v1/jobs\n`);
  process.stdout.write(`stagecoach dashboard on http://${server.host}:${server.port}/\n`);
  const received = await signal.promise;
  log.info('stopping the admin API', { signal: received });
  await server.close();
  signal.dispose();
  return EXIT_OK;
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535)
    throw new StagecoachError('INVALID_REQUEST', `--port must be an integer from 0 to 65535, got "${value}"`);
  return port;
}

/** `admin` of the file as written (the schema checks it when the server loads the file). */
async function adminSettings(file: string): Promise<NonNullable<RawConfig['admin']>> {
  try {
    const raw = JSON.parse(await readFile(file, 'utf8')) as RawConfig;
    return typeof raw.admin === 'object' && raw.admin !== null ? raw.admin : {};
  } catch {
    return {}; // loading the file again in startAdminServer reports what is wrong with it
  }
}
