import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors/errors.js';
import type { CompiledConfig, RawConfig } from './config.types.js';
import { compileConfig } from './compile-config.js';

/** Default configuration path when neither `--config` nor `STAGECOACH_CONFIG` is given. */
export const DEFAULT_CONFIG_PATH = 'stagecoach.json';

/**
 * Step 1 of the configuration: read the file as written and apply environment overrides
 * (`AMQP_URL`, `STAGECOACH_MANAGEMENT_URL`, `STAGECOACH_PREFIX`, `STAGECOACH_HTTP_PORT`), then
 * compile it.
 */
export async function loadConfig(file?: string, env: NodeJS.ProcessEnv = process.env): Promise<CompiledConfig> {
  const source = path.resolve(file ?? env.STAGECOACH_CONFIG ?? DEFAULT_CONFIG_PATH);
  let text: string;
  try {
    text = await readFile(source, 'utf8');
  } catch (err) {
    throw new ConfigError(source, '', `a readable file (${(err as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(source, '', `valid JSON (${(err as Error).message})`);
  }
  return compileConfig(applyEnvironment(raw, env), source);
}

/** Environment variables win over the file; anything else stays as written. */
export function applyEnvironment(raw: unknown, env: NodeJS.ProcessEnv): unknown {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return raw;
  const config = { ...(raw as RawConfig) };
  if (env.AMQP_URL) config.broker = withAmqpUrl(config.broker, env.AMQP_URL);
  if (env.STAGECOACH_MANAGEMENT_URL) config.broker = { ...config.broker, management: env.STAGECOACH_MANAGEMENT_URL };
  if (env.STAGECOACH_PREFIX) config.prefix = env.STAGECOACH_PREFIX;
  if (env.STAGECOACH_HTTP_PORT) config.httpPort = Number(env.STAGECOACH_HTTP_PORT);
  return config;
}

/**
 * `AMQP_URL` replaces the file's broker: one URL, or a cluster's nodes separated by commas
 * (containers get one variable for either).
 */
function withAmqpUrl(broker: RawConfig['broker'], value: string): NonNullable<RawConfig['broker']> {
  const rest = { ...broker };
  delete rest.url;
  delete rest.urls;
  const urls = value
    .split(',')
    .map((url) => url.trim())
    .filter((url) => url !== '');
  return urls.length > 1 ? { ...rest, urls } : { ...rest, url: urls[0] ?? value };
}
