import type { Command } from 'commander';
import { admin, type AdminOptions } from './commands/admin.js';
import { credentials } from './commands/credentials.js';
import { payloadsCount, payloadsSweep } from './commands/payloads.js';
import { configOption } from './command-options.js';

/** `stagecoach admin`, the credentials it and the broker take, and the payload store it sweeps (docs/cli.md). */
export function addAdminCommands(program: Command): void {
  program
    .command('admin')
    .description(
      'the OJS queue admin HTTP API (docs/admin-api.md) and the OJS HTTP binding (docs/http-binding.md); changes need STAGECOACH_ADMIN_TOKEN as a bearer token',
    )
    .option('--port <port>', 'TCP port (default: admin.port in the configuration, else 9500)')
    .option('--host <host>', 'address to listen on (default: admin.host in the configuration, else 127.0.0.1)')
    .option(
      '--no-payload-sweep',
      'do not sweep the payload store (every orphan_after/4, at most hourly); something else runs `payloads sweep`',
    )
    .option('--test-reset', 'serve POST /ojs/v1/admin/reset, which deletes every job of the prefix (conformance runs; never production)')
    .option('--no-auth', 'requests without a token act as the admin; refused unless --host is a loopback address (never production)')
    .option('--no-scheduler', 'do not fire schedules here (`stagecoach scheduler` processes do)')
    .addOption(configOption())
    .action(async (opts: AdminOptions) => {
      process.exitCode = await admin(opts);
    });

  const payloads = program.command('payloads').description('the payload store of jobs sent by reference (docs/payloads.md)');
  payloads
    .command('sweep')
    .description('delete payloads still pending after payloads.orphan_after and any older than payloads.retention; print how many')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await payloadsSweep(opts);
    });
  payloads
    .command('count')
    .description('how many payloads the store holds (of one tenant, or all)')
    .option('-t, --tenant <tenant>', 'only this tenant\'s payloads (a tenant slug, or "_" for jobs without a tenant)')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; json?: boolean; config?: string }) => {
      process.exitCode = await payloadsCount(opts);
    });

  program
    .command('credentials [tenant]')
    .description("with security.tenantUsers: set a fresh password for a tenant's broker user (or the internal user) and print its AMQP URL")
    .option(
      '--role <role>',
      "producer, stage, internal (no tenant), http (a tenant's bearer token for the admin port) or viewer (a read-only token; the argument names its holder)",
      'producer',
    )
    .addOption(configOption())
    .action(async (tenant: string | undefined, opts: { role: string; config?: string }) => {
      process.exitCode = await credentials(tenant, opts);
    });
}
