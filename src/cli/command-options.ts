import { Option } from 'commander';

/** `-c, --config`: every command that reads the configuration takes it. */
export const configOption = (): Option => new Option('-c, --config <file>', 'configuration file (env STAGECOACH_CONFIG)');

/** `--http-port`: the processes that serve health and metrics. */
export const httpPortOption = (): Option =>
  new Option('--http-port <port>', '/healthz, /readyz and /metrics port, 0 = off (env STAGECOACH_HTTP_PORT, default 9400)');

/** `-t, --tenant`: one tenant, by slug. */
export const tenantOption = (): Option =>
  new Option('-t, --tenant <tenant>', 'tenant slug: lowercase letters, digits, "_" and "-" (env STAGECOACH_TENANT)');

/** Collects a repeatable option's values. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}
