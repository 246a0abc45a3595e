import type { Command } from 'commander';
import { runDev, runPooled, runStage } from './commands/run.js';
import { workerControl } from './commands/control.js';
import { configOption, httpPortOption, tenantOption } from './command-options.js';

/** `stagecoach run`, `dev`, and `quiet` / `terminate` for the stages they run (docs/cli.md). */
export function addRunCommands(program: Command): void {
  program
    .command('run <stage>')
    .description('run one stage instance until SIGTERM/SIGINT, then drain and exit 0')
    .addOption(tenantOption())
    .option('--tenants <list>', 'pooled: serve these tenants (comma-separated) in one process, with a weighted fair share')
    .option('--all-tenants', 'pooled: serve every configured or provisioned tenant, following tenants provisioned or retired while it runs')
    .option('--variant <variant>', 'consume the specialised queue of this variant')
    .addOption(httpPortOption())
    .addOption(configOption())
    .action(
      async (
        stage: string,
        opts: { tenant?: string; tenants?: string; allTenants?: boolean; variant?: string; config?: string; httpPort?: string },
      ) => {
        process.exitCode =
          opts.tenants !== undefined || opts.allTenants === true ? await runPooled(stage, opts) : await runStage(stage, opts);
      },
    );

  program
    .command('dev')
    .description('every stage for every tenant in one process')
    .addOption(httpPortOption())
    .addOption(configOption())
    .action(async (opts: { config?: string; httpPort?: string }) => {
      process.exitCode = await runDev(opts);
    });

  for (const [command, description] of [
    ['quiet', 'running stages stop fetching new jobs and finish the ones they have'],
    ['terminate', 'running stages finish their jobs and exit 0'],
  ] as const) {
    program
      .command(command)
      .description(description)
      .option('--stage <stage>', 'only instances of this stage')
      .addOption(tenantOption())
      .addOption(configOption())
      .action(async (opts: { stage?: string; tenant?: string; config?: string }) => {
        process.exitCode = await workerControl(command, opts);
      });
  }
}
