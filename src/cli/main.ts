import { Command, CommanderError, Option } from 'commander';
import { runDev, runPooled, runStage } from './commands/run.js';
import { provision, printTopology } from './commands/topology.js';
import { queueStateCommand, workerControl } from './commands/control.js';
import { credentials } from './commands/credentials.js';
import { apply, plan } from './commands/plan.js';
import { queueDelete, tenantRetire } from './commands/remove.js';
import { dead } from './commands/dead.js';
import { publish, type PublishOptions } from './commands/publish.js';
import { queues } from './commands/queues.js';
import { limits, limitsSet } from './commands/limits.js';
import { admin } from './commands/admin.js';
import { payloadsCount, payloadsSweep } from './commands/payloads.js';
import { unroutableList, unroutableReplay } from './commands/unroutable.js';
import { batchList, batchStatus, tracker } from './commands/batch.js';
import { jobCancel, jobList, jobStatus, type JobListOptions } from './commands/jobs.js';
import { batchDirective, tenantDirective } from './commands/directives.js';
import { workflowCancel, workflowList, workflowStatus } from './commands/workflow.js';
import { EXIT_USAGE, exitCodeFor } from './exit-codes.js';
import { addScheduleCommands } from './schedule-program.js';
import { packageVersion } from '../util/package-version.js';
import { queueArgument, queueName } from './queue-argument.js';

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** Builds the `stagecoach` program. Every action resolves with its exit code. */
export function buildProgram(): Command {
  const program = new Command('stagecoach')
    .description('Multi-tenant worker pipelines on RabbitMQ')
    .version(packageVersion(), '-V, --version', 'print the version of stagecoach')
    .showHelpAfterError()
    .exitOverride();
  const configOption = (): Option => new Option('-c, --config <file>', 'configuration file (env STAGECOACH_CONFIG)');
  const httpPortOption = (): Option =>
    new Option('--http-port <port>', '/healthz, /readyz and /metrics port, 0 = off (env STAGECOACH_HTTP_PORT, default 9400)');
  const tenantOption = (): Option =>
    new Option('-t, --tenant <tenant>', 'tenant slug: lowercase letters, digits, "_" and "-" (env STAGECOACH_TENANT)');

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

  program
    .command('provision')
    .description('declare all exchanges, queues and bindings, for one tenant or all')
    .addOption(tenantOption())
    .addOption(configOption())
    .action(async (opts: { tenant?: string; config?: string }) => {
      process.exitCode = await provision(opts);
    });

  program
    .command('plan')
    .description('print the difference between the configuration and the broker; exit 0 when nothing differs, 3 when something does')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await plan(opts);
    });

  program
    .command('apply')
    .description('carry out the plan (declare what is missing, change queue settings); never deletes a queue or a job')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await apply(opts);
    });

  program
    .command('queues')
    .description('every physical queue: state, ready, unacked, consumers, rates, max_size use, due, suspect and dead depth')
    .option('-t, --tenant <tenant>', "only this tenant's queues (a tenant slug)")
    .option('--json', 'machine-readable output (every queue, whatever --limit says)')
    .option('--limit <n>', 'table rows at most, 0 for all (default 200)')
    .option('--offset <n>', 'table rows skipped (default 0)')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; json?: boolean; config?: string; limit?: string; offset?: string }) => {
      process.exitCode = await queues(opts);
    });

  const limitsCommand = program
    .command('limits')
    .description('flow-limit partitions on the broker: limit, active, starts in the window (docs/flow-control.md)')
    .option('--key <key>', 'only this partition')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { key?: string; json?: boolean; config?: string }) => {
      process.exitCode = await limits(opts);
    });
  limitsCommand
    .command('set <key>')
    .description('replace limits.<key> in the configuration file; running stages take it within a second')
    .option('--concurrency <n>', 'most jobs holding it active at once, across every process')
    .option('--rate <n/period>', 'most starts in any window, e.g. 50/PT1S')
    .option('--throttle <n/period>', 'starts spaced evenly, e.g. 10/PT1S')
    .option('--per-tenant', 'one partition per tenant')
    .addOption(configOption())
    .action(async (key: string, opts: { concurrency?: string; rate?: string; throttle?: string; perTenant?: boolean; config?: string }) => {
      // `limits` takes --config too, and commander gives it to `limits` wherever it is written.
      const config = opts.config ?? limitsCommand.opts<{ config?: string }>().config;
      process.exitCode = await limitsSet(key, { ...opts, ...(config === undefined ? {} : { config }) });
    });

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
    .action(
      async (opts: {
        port?: string;
        host?: string;
        config?: string;
        payloadSweep?: boolean;
        testReset?: boolean;
        auth?: boolean;
        scheduler?: boolean;
      }) => {
        process.exitCode = await admin(opts);
      },
    );

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
    .command('topology')
    .description('print what would be declared, without touching the broker')
    .addOption(tenantOption())
    .option('--stage <stage>', 'only what `run <stage>` declares')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; stage?: string; json?: boolean; config?: string }) => {
      process.exitCode = await printTopology(opts);
    });

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

  program
    .command('dead <action>')
    .addArgument(queueArgument())
    .description('dead letters of a queue: list (look), retry (send back with a fresh attempt count), purge (drop)')
    .addOption(tenantOption())
    .option('--limit <n>', 'most messages to list', '100')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (action: string, queue: string, opts: { tenant?: string; json?: boolean; limit: string; config?: string }) => {
      process.exitCode = await dead(action, queue, opts);
    });

  for (const [command, description] of [
    ['pause', 'stages stop consuming the queue (jobs in flight finish); it still takes new jobs. Kept on the broker until resumed'],
    ['resume', 'the queue is active again: stages consume it, and a draining queue takes new jobs again'],
    ['drain', 'the queue takes no new jobs (they are kept in unroutable) while stages empty it. Kept on the broker until resumed'],
  ] as const) {
    program
      .command(command)
      .addArgument(queueArgument())
      .description(description)
      .addOption(tenantOption())
      .option('--variant <variant>', 'only this variant queue (pause and resume; a drain is the whole queue)')
      .addOption(configOption())
      .action(async (queue: string, opts: { tenant?: string; variant?: string; config?: string }) => {
        process.exitCode = await queueStateCommand(command, queue, opts);
      });
  }
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

  const strategyOption = (): Option =>
    new Option(
      '--strategy <strategy>',
      'what happens to the jobs: reject (refuse while any remain), discard (drop them), move (to --target)',
    )
      .choices(['reject', 'discard', 'move'])
      .makeOptionMandatory();
  const tenant = program.command('tenant').description('tenants on the broker');
  tenant
    .command('retire <tenant>')
    .description('remove a tenant and everything of it on the broker: queues, exchanges, bindings, policies, broker users')
    .addOption(strategyOption())
    .option('--target <queue>', 'with --strategy move: the shared queue its jobs go to', queueName('--target'))
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (name: string, opts: { strategy: string; target?: string; json?: boolean; config?: string }) => {
      process.exitCode = await tenantRetire(name, opts);
    });
  for (const [action, description] of [
    ['pause', 'park every job of the tenant where a stage meets it (every stage, shared queues too) until `tenant resume`'],
    ['resume', 'end the pause and send the parked jobs of the tenant back where they were going'],
  ] as const) {
    tenant
      .command(`${action} <tenant>`)
      .description(description)
      .option('--json', 'machine-readable output')
      .addOption(configOption())
      .action(async (name: string, opts: { json?: boolean; config?: string }) => {
        process.exitCode = await tenantDirective(action, name, opts);
      });
  }
  const queue = program.command('queue').description('logical queues on the broker');
  queue
    .command('delete')
    .addArgument(queueArgument())
    .description('remove a logical queue (for one tenant, or all): its queues, variant routers, bindings and policies')
    .addOption(tenantOption())
    .addOption(strategyOption())
    .option('--target <queue>', "with --strategy move: the queue its jobs go to (each tenant's own)", queueName('--target'))
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (name: string, opts: { tenant?: string; strategy: string; target?: string; json?: boolean; config?: string }) => {
      process.exitCode = await queueDelete(name, opts);
    });

  const unroutable = program.command('unroutable').description('the queue of jobs no queue would take');
  unroutable
    .command('list')
    .option('--limit <n>', 'most messages to show', '100')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { limit: string; json?: boolean; config?: string }) => {
      process.exitCode = await unroutableList(opts);
    });
  unroutable
    .command('replay')
    .description('send jobs back to their tenant or queue, where one exists now')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await unroutableReplay(opts);
    });

  program
    .command('tracker')
    .description(
      'fold settlement reports into batch state; announce batch.completed (docs/batches.md); advance workflows (docs/workflows.md)',
    )
    .addOption(configOption())
    .action(async (opts: { config?: string }) => {
      process.exitCode = await tracker(opts);
    });
  const batch = program.command('batch').description('batches of jobs: their state, read from the tracking stream');
  batch
    .command('status <batch>')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await batchStatus(id, opts);
    });
  batch
    .command('list')
    .addOption(tenantOption())
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; json?: boolean; config?: string }) => {
      process.exitCode = await batchList(opts);
    });
  for (const [action, description] of [
    ['cancel', 'discard every job of the batch not yet started, where a stage meets it; the batch completes as cancelled'],
    ['pause', 'park every job of the batch where a stage meets it until `batch resume`'],
    ['resume', 'end the pause and send the parked jobs of the batch back where they were going'],
  ] as const) {
    batch
      .command(`${action} <batch>`)
      .description(description)
      .option('--json', 'machine-readable output')
      .addOption(configOption())
      .action(async (id: string, opts: { json?: boolean; config?: string }) => {
        process.exitCode = await batchDirective(action, id, opts);
      });
  }
  const workflow = program
    .command('workflow')
    .description("workflows (chains, groups, batches of jobs): their state and every step's, read from the tracking stream");
  workflow
    .command('status <id>')
    .description("the workflow's state and every step's, nested as the workflow is")
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await workflowStatus(id, opts);
    });
  workflow
    .command('list')
    .addOption(tenantOption())
    .option('--state <state>', 'only workflows in this state: pending, running, completed, failed, cancelled')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; state?: string; json?: boolean; config?: string }) => {
      process.exitCode = await workflowList(opts);
    });
  workflow
    .command('cancel <id>')
    .description('what has not started never will; jobs running finish (exit 1 when the workflow has ended)')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await workflowCancel(id, opts);
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

  addScheduleCommands(program, configOption, httpPortOption);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version are not errors; anything else commander refuses is bad usage.
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    process.stderr.write(`stagecoach: ${(err as Error).message}\n`);
    return exitCodeFor(err);
  }
}
