import winston from 'winston';

export type Logger = winston.Logger;

/**
 * JSON lines on stderr (stdout is for the results of inspection commands). The level comes
 * from `LOG_LEVEL` (default `info`); winston drops a line below the level before formatting
 * it, so debug lines on the hot path cost a level comparison when off.
 */
export function createLogger(fields: Record<string, unknown> = {}, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return winston.createLogger({
    level,
    defaultMeta: fields,
    format: winston.format.combine(winston.format.timestamp(), winston.format.errors({ stack: true }), winston.format.json()),
    transports: [new winston.transports.Console({ stderrLevels: Object.keys(winston.config.npm.levels) })],
  });
}
