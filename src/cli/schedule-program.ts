import type { Command, Option } from 'commander';
import { cronAdd, cronChange, cronList, cronTrigger, type CronAddOptions } from './commands/cron.js';
import { scheduler } from './commands/scheduler.js';

/** `stagecoach scheduler` and `stagecoach cron ...` (docs/schedules.md, docs/cli.md). */
export function addScheduleCommands(program: Command, configOption: () => Option, httpPortOption: () => Option): void {
  program
    .command('scheduler')
    .description('fire the schedules while this process is the leader (one leads; another takes over within 30 s), until SIGTERM/SIGINT')
    .addOption(httpPortOption())
    .addOption(configOption())
    .action(async (opts: { config?: string; httpPort?: string }) => {
      process.exitCode = await scheduler(opts);
    });

  const cron = program.command('cron').description('schedules: recurring jobs, per tenant if asked (docs/schedules.md)');
  cron
    .command('list')
    .description('every schedule: expression, zone, target, next and last run, run count; and who leads')
    .option('--json', 'machine-readable output: { crons, count, leader }')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await cronList(opts);
    });
  cron
    .command('add <name>')
    .description('register a schedule, or replace the one of that name (one in the configuration file is changed there)')
    .requiredOption('--cron <expression>', 'when: 5 or 6 fields, @daily..., or "@every 30m"')
    .requiredOption('--type <type>', 'job type of every occurrence')
    .option('--queue <queue>', 'logical queue (default "default")')
    .option('--args <json>', 'job arguments, a JSON array')
    .option('--meta <json>', 'job meta, a JSON object')
    .option('--timezone <zone>', 'IANA time zone of the expression (default UTC)')
    .option('--tenants <list>', '"*" for every tenant, or a comma-separated list: one job per tenant per occurrence')
    .option('--spread <duration>', "with --tenants: spread the tenants' jobs over this window, e.g. PT30M")
    .option('--overlap <policy>', 'skip (default), allow, cancel_previous or enqueue')
    .option('--batch', 'each occurrence (per tenant) starts a batch')
    .option('--disabled', 'register it disabled')
    .option('--description <text>', 'what it is for')
    .option('--priority <n>', 'job priority')
    .option('--timeout <seconds>', 'execution timeout of every job')
    .option('--retry <json>', 'retry policy of every job, a JSON object')
    .addOption(configOption())
    .action(async (name: string, opts: CronAddOptions) => {
      process.exitCode = await cronAdd(name, opts);
    });
  for (const action of ['remove', 'enable', 'disable'] as const) {
    cron
      .command(`${action} <name>`)
      .description(
        action === 'remove'
          ? "unregister a schedule (jobs it enqueued stay); a tenant's is <tenant>/<name>"
          : `${action} a schedule without changing it${action === 'disable' ? ' (it stays registered and does not fire)' : ''}`,
      )
      .addOption(configOption())
      .action(async (name: string, opts: { config?: string }) => {
        process.exitCode = await cronChange(action, name, opts);
      });
  }
  cron
    .command('trigger <name>')
    .description('fire one occurrence now (the leader fires it), for --tenant or for every tenant of the schedule')
    .option('-t, --tenant <tenant>', 'only for this tenant')
    .addOption(configOption())
    .action(async (name: string, opts: { tenant?: string; config?: string }) => {
      process.exitCode = await cronTrigger(name, opts);
    });
}
