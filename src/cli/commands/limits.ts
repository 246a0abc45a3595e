import path from 'node:path';
import { ConfigFile } from '../../http-api/config-file.js';
import type { LimitConfig, LimitWindow } from '../../config/config.types.js';
import { DEFAULT_CONFIG_PATH, loadConfig } from '../../config/load-config.js';
import { sendControl } from '../../control/send-control.js';
import { ConfigError } from '../../errors/errors.js';
import { inspectLimits, type LimitReport } from '../../inspect/limit-report.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';

/**
 * `stagecoach limits [--key K] [--json]`: every flow-limit partition the broker holds (docs/flow-control.md):
 * its limit, the tokens that exist, the jobs active under it (concurrency), the starts in the
 * current window (rate), whether a throttle is cooling.
 */
export async function limits(opts: { key?: string; json?: boolean; config?: string }): Promise<number> {
  const config = await loadConfig(opts.config);
  const reports = await inspectLimits(config, opts.key);
  process.stdout.write(opts.json === true ? `${JSON.stringify(reports, null, 2)}\n` : formatLimits(reports));
  return EXIT_OK;
}

/**
 * `stagecoach limits set <key> [--concurrency N] [--rate N/PERIOD] [--throttle N/PERIOD]
 * [--per-tenant]`: replaces `limits.<key>` in the configuration file (the extension's `PUT
 * /ojs/v1/rate-limits/{key}`), then tells running stages, which take it within a second.
 */
export async function limitsSet(
  key: string,
  opts: { concurrency?: string; rate?: string; throttle?: string; perTenant?: boolean; config?: string },
): Promise<number> {
  const file = new ConfigFile(path.resolve(opts.config ?? process.env.STAGECOACH_CONFIG ?? DEFAULT_CONFIG_PATH));
  const limit: LimitConfig = {};
  if (opts.concurrency !== undefined) limit.concurrency = wholeNumber(file.file, key, 'concurrency', opts.concurrency);
  if (opts.rate !== undefined) limit.rate = windowOf(file.file, key, 'rate', opts.rate);
  if (opts.throttle !== undefined) limit.throttle = windowOf(file.file, key, 'throttle', opts.throttle);
  if (opts.perTenant === true) limit.per_tenant = true;
  const raw = await file.readRaw();
  const config = await file.write({ ...raw, limits: { ...raw.limits, [key]: limit } });
  await sendControl(config, { command: 'limits' }, createLogger({ service: 'stagecoach', command: 'limits set' }));
  process.stdout.write(`limits.${key} = ${JSON.stringify(limit)}: running stages take it within a second\n`);
  return EXIT_OK;
}

function wholeNumber(source: string, key: string, field: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) throw new ConfigError(source, `limits.${key}.${field}`, `a whole number >= 0, got "${text}"`);
  return value;
}

/** `N/PERIOD`, as in `50/PT1S`. */
function windowOf(source: string, key: string, field: string, text: string): LimitWindow {
  const [limit, period] = text.split('/');
  if (period === undefined) throw new ConfigError(source, `limits.${key}.${field}`, `LIMIT/PERIOD such as 50/PT1S, got "${text}"`);
  return { limit: wholeNumber(source, key, `${field}.limit`, limit), period };
}

/** The partitions as a table. */
export function formatLimits(reports: readonly LimitReport[]): string {
  if (reports.length === 0) return 'no flow-limit partition on the broker yet (a partition appears when a job first needs it)\n';
  const rows = reports.map((report) => [
    report.key,
    report.concurrency === undefined
      ? '-'
      : `${report.concurrency.active}/${report.concurrency.limit}${report.concurrency.tokens === report.concurrency.limit ? '' : ` (${report.concurrency.tokens} tokens)`}`,
    report.rate === undefined ? '-' : `${report.rate.current_count}/${report.rate.limit} per ${report.rate.period_ms} ms`,
    report.throttle === undefined
      ? '-'
      : `${report.throttle.limit} per ${report.throttle.period_ms} ms${report.throttle.cooling ? ' (cooling)' : ''}`,
  ]);
  const header = ['KEY', 'ACTIVE/CONCURRENCY', 'STARTS/RATE', 'THROTTLE'];
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]): string =>
    `${cells
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd()}\n`;
  return line(header) + rows.map(line).join('');
}
