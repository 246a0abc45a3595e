import { Option, type Command } from 'commander';
import { publish, type PublishOptions } from './commands/publish.js';
import { jobCancel, jobList, jobStatus, type JobListOptions } from './commands/jobs.js';
import { queueArgument, queueName } from './queue-argument.js';
import { collect, configOption, tenantOption } from './command-options.js';

/** `stagecoach publish` and `job status` / `list` / `cancel` (docs/cli.md, docs/job-state.md). */
export function addJobCommands(program: Command): void {
  program
    .command('publish')
    .addArgument(queueArgument())
    .description('enqueue one job (OJS PUSH) and print its id')
    .requiredOption('--type <type>', 'job type')
    .option('--args <json>', 'job arguments, a JSON array', '[]')
    .option('--meta <json>', 'job meta, a JSON object')
    .addOption(tenantOption())
    .option('--batch <id>', 'start the job in this batch: every job emitted downstream of it joins it (docs/batches.md)')
    .option(
      '--on-complete <json>',
      'with --batch: a job the tracker publishes when the batch completes, e.g. {"queue":"q","type":"t","args":[]}',
    )
    .option('--on-success <json>', 'with --batch: a job the tracker publishes when the batch completes with no failed job')
    .option('--on-failure <json>', 'with --batch: a job the tracker publishes when the batch completes with a failed job')
    .option('--header <k=v>', 'extra AMQP header (repeatable)', collect, [])
    .option('--tag <tag>', 'a tag kept on the job and in the job store, for `job list --tag` (repeatable)', collect, [])
    .option('--priority <n>', 'job priority, an integer, higher first (ordered in a queue with max_priority)')
    .option('--timeout <seconds>', 'execution timeout in seconds, a positive number')
    .option('--retry <json>', 'the job\'s own OJS retry policy, a JSON object, e.g. {"max_attempts":5}')
    .option('--rate-limit <json>', 'the job\'s own OJS rate_limit policy, e.g. {"key":"ocr","concurrency":5} (docs/flow-control.md)')
    .option('--enqueue-ttl <duration>', 'how long the job may wait in its queue, an ISO 8601 duration, e.g. PT10M')
    .addOption(
      new Option(
        '--scheduled-at <timestamp>',
        'deliver the job at this time: ISO 8601 with a time zone, at most about 12 days ahead',
      ).conflicts('delay'),
    )
    .addOption(new Option('--delay <duration>', 'deliver the job this long after publishing: an ISO 8601 duration, e.g. PT30S'))
    .addOption(configOption())
    .action(async (queue: string, opts: PublishOptions) => {
      process.exitCode = await publish(queue, opts);
    });

  const job = program.command('job').description('any tracked job: its OJS state, attempts, errors, result (docs/job-state.md)');
  job
    .command('status <id>')
    .description("one job's state, attempts, errors, stage, result, parent and children")
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await jobStatus(id, opts);
    });
  job
    .command('list')
    .description('tracked jobs by id (creation order), a page at a time')
    .addOption(tenantOption())
    .option('--queue <queue>', 'only jobs of this logical queue', queueName('--queue'))
    .option(
      '--state <state>',
      'only jobs in this state (scheduled, available, pending, active, completed, retryable, cancelled, discarded)',
    )
    .option('--type <type>', 'only jobs of this type')
    .option('--tag <tag>', 'only jobs carrying this tag')
    .option('--since <iso>', 'only jobs created at or after this time')
    .option('--limit <n>', 'jobs per page, 1 to 1000 (default 100)')
    .option('--cursor <id>', 'the page after this id (printed by the previous page)')
    .option('--json', 'machine-readable output: { jobs, next_cursor }')
    .addOption(configOption())
    .action(async (opts: JobListOptions) => {
      process.exitCode = await jobList(opts);
    });
  job
    .command('cancel <id>')
    .description('cancel a job that has not started: the stage that meets it discards it unrun (exit 1 when it runs or ended)')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await jobCancel(id, opts);
    });
}
