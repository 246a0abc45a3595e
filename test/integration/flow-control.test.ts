import path from 'node:path';
import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { finished, REPO_ROOT, spawnCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { activeAt, peakActive, peakStartsPerWindow, readJournal, type JournalEntry } from '../helpers/journal.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import type { RawConfig } from '../../src/config/config.types.js';

const FLOW_STAGES_MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/flow-stages.js');
const log = createLogger({ test: 'flow-control' }, 'error');
const LIMITED = [{ name: 'limited', input: 'work', outputs: [] }];
const CALLER = [{ name: 'caller', input: 'calls', outputs: [] }];

type Child = ReturnType<typeof spawnCli>;

/** `count` jobs of `ms` ms each for `tenant` on `queue`. */
async function publishNaps(project: ConfigFile, queue: string, tenant: string, count: number, ms: number, extra: object = {}): Promise<string[]> {
  const publisher = await Publisher.connect(project.config, { log });
  try {
    const ids = [];
    for (let i = 0; i < count; i++) ids.push(await publisher.publish(queue, { type: 'nap', args: [ms], tenant, ...extra }));
    return ids;
  } finally {
    await publisher.close();
  }
}

function starts(entries: readonly JournalEntry[]): JournalEntry[] {
  return entries.filter((entry) => entry.what === 'start');
}

describe('flow control: limits held across processes (docs/flow-control.md)', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let journal: string;
  const children: Child[] = [];

  async function setUp(settings: RawConfig, stages: typeof LIMITED, name: string): Promise<void> {
    project = await writeConfigFile(settings, stages, name);
    journal = path.join(project.dir, 'journal.log');
  }

  function run(stage: string, tenantArgs: string[]): Child {
    const child = spawnCli(['run', stage, ...tenantArgs, '--config', project.file], { AMQP_URL });
    children.push(child);
    return child;
  }

  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await finished(child, 40_000, 'run').catch(() => child.kill('SIGKILL'));
      }
    }
    await project?.remove();
  });

  it('queue concurrency 3 read by 3 processes of concurrency 8: never more than 3 handlers, 3 while work waits, 3 again soon after a holder is SIGKILLed', async () => {
    await setUp(
      {
        tenants: ['acme'],
        queues: { work: { concurrency: 3 } },
        stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 8, options: { journal: '' } } },
      },
      LIMITED,
      'flow-concurrency',
    );
    await rewriteJournal(project, journal);
    const processes = [0, 1, 2].map(() => run('limited', ['--tenant', 'acme']));
    await publishNaps(project, 'work', 'acme', 60, 300);
    await waitFor('jobs running', async () => starts(await readJournal(journal)).length >= 6, 30_000);
    // While work waits, 3 run: sampled over a few seconds.
    const sampleFrom = Date.now();
    await waitFor('3 s of work', () => Date.now() - sampleFrom > 3000, 5000);
    let entries = await readJournal(journal);
    // A token passes from a job that ends to the next within a few ms (its settlement, a round
    // trip to the broker): counted over time, 3 run all but those moments.
    expect(meanActive(entries, sampleFrom, sampleFrom + 3000)).to.be.within(2.85, 3);
    expect(peakActive(entries)).to.equal(3);

    // A process holding capacity dies: its tokens come back with its connection.
    const holder = entries.filter((entry) => entry.what === 'start').at(-1)?.pid as number;
    const victim = processes.find((child) => child.pid === holder) as Child;
    victim.kill('SIGKILL');
    const killedAt = Date.now();
    const alive = (entries: JournalEntry[]): JournalEntry[] => entries.filter((entry) => entry.pid !== holder);
    await waitFor(
      '3 running again in the survivors',
      async () => {
        const now = Date.now() - 20;
        return now - killedAt > 300 && activeAt(alive(await readJournal(journal)), now) === 3 && now - killedAt;
      },
      10_000,
      20,
    );
    const ended = async (): Promise<Set<string>> =>
      new Set((await readJournal(journal)).filter((entry) => entry.what === 'end').map((entry) => entry.job));
    await waitFor('every job run to its end', async () => (await ended()).size === 60, 60_000, 200);
    entries = await readJournal(journal);
    // The survivors never ran more than 3 at once, before or after the kill (the victim's
    // handlers that were cut off have no end line: they are left out).
    expect(peakActive(alive(entries))).to.equal(3);
  });
});

/** Handlers running on average between `from` and `to` (time-weighted). */
function meanActive(entries: readonly JournalEntry[], from: number, to: number): number {
  let sum = 0;
  for (let at = from; at < to; at += 5) sum += activeAt(entries, at);
  return sum / Math.ceil((to - from) / 5);
}

/** Points the stage's journal option at `file` (the config file is written before the journal's directory is known). */
async function rewriteJournal(project: ConfigFile, file: string): Promise<void> {
  const { readFile, writeFile } = await import('node:fs/promises');
  const raw = JSON.parse(await readFile(project.file, 'utf8')) as RawConfig;
  for (const stage of Object.values(raw.stages ?? {})) if (stage.options !== undefined) stage.options.journal = file;
  await writeFile(project.file, JSON.stringify(raw));
}

void CALLER;
void peakStartsPerWindow;
