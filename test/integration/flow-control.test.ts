import path from 'node:path';
import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { finished, REPO_ROOT, runCli, spawnCli } from '../helpers/cli.js';
import { readFile } from 'node:fs/promises';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { activeAt, peakActive, peakStartsPerWindow, readJournal, type JournalEntry } from '../helpers/journal.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { freePorts } from '../helpers/broker-node.js';
import { waitFor } from '../helpers/wait-for.js';
import type { RawConfig } from '../../src/config/config.types.js';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';

const FLOW_STAGES_MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/flow-stages.js');
const log = createLogger({ test: 'flow-control' }, 'error');
const LIMITED = [{ name: 'limited', input: 'work', outputs: [] }];
const CALLER = [{ name: 'caller', input: 'calls', outputs: [] }];

type Child = ReturnType<typeof spawnCli>;

/** `count` jobs of `ms` ms each for `tenant` on `queue`. */
async function publishNaps(
  project: ConfigFile,
  queue: string,
  tenant: string,
  count: number,
  ms: number,
  extra: object = {},
  more: unknown[] = [],
): Promise<string[]> {
  const publisher = await Publisher.connect(project.config, { log });
  try {
    const ids = [];
    for (let i = 0; i < count; i++) ids.push(await publisher.publish(queue, { type: 'nap', args: [ms, ...more], tenant, ...extra }));
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

  function run(stage: string, tenantArgs: string[], httpPort?: number): Child {
    const child = spawnCli(['run', stage, ...tenantArgs, '--config', project.file], {
      AMQP_URL,
      ...(httpPort === undefined ? {} : { STAGECOACH_HTTP_PORT: String(httpPort) }),
    });
    children.push(child);
    return child;
  }

  /** Runs the stage with a health port and waits until /readyz says ready: its control listener is bound too. */
  async function runReady(stage: string, tenantArgs: string[]): Promise<Child> {
    const [port] = await freePorts(1);
    const child = run(stage, tenantArgs, port);
    await waitFor(
      `${stage} ready`,
      async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200,
      20_000,
      50,
    );
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
    // Waiting counted no attempt: until the kill, every job started at attempt 1, though most
    // waited for a token first. (After it, what the victim had in hand comes back as suspects.)
    expect(starts(entries).filter((entry) => entry.at < killedAt && entry.attempt !== 1)).to.deep.equal([]);
  });

  it('rate 20 per PT1S on a queue read by 2 processes: no 1-second window over 20 starts, and at least 90% of 20/s sustained over 10 s', async () => {
    await setUp(
      {
        tenants: ['acme'],
        queues: { work: { rate_limit: { limit: 20, period: 'PT1S' } } },
        stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 8, options: { journal: '' } } },
      },
      LIMITED,
      'flow-rate',
    );
    await rewriteJournal(project, journal);
    run('limited', ['--tenant', 'acme']);
    run('limited', ['--tenant', 'acme']);
    await publishNaps(project, 'work', 'acme', 300, 5);
    await waitFor(
      '12 s of starts',
      async () => {
        const started = starts(await readJournal(journal));
        return started.length > 0 && (started.at(-1) as JournalEntry).at - started[0].at >= 12_000;
      },
      40_000,
      200,
    );
    const entries = await readJournal(journal);
    const started = starts(entries);
    expect(new Set(started.map((entry) => entry.pid)).size, 'both processes started jobs').to.equal(2);
    expect(peakStartsPerWindow(entries, 1000)).to.be.at.most(20);
    // Sustained: the 10 s after the first second.
    const from = started[0].at + 1000;
    const inTen = started.filter((entry) => entry.at >= from && entry.at < from + 10_000).length;
    expect(inTen, 'starts in 10 s').to.be.at.least(180);
  });

  it('throttle 10 per PT1S (a named limit): starts at least about 100 ms apart', async () => {
    await setUp(
      {
        tenants: ['acme'],
        limits: { api: { throttle: { limit: 10, period: 'PT1S' } } },
        stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 8, limits: ['api'], options: { journal: '' } } },
      },
      LIMITED,
      'flow-throttle',
    );
    await rewriteJournal(project, journal);
    run('limited', ['--tenant', 'acme']);
    run('limited', ['--tenant', 'acme']);
    await publishNaps(project, 'work', 'acme', 25, 5);
    await waitFor('every start', async () => starts(await readJournal(journal)).length === 25, 20_000, 200);
    const started = starts(await readJournal(journal)).map((entry) => entry.at);
    const gaps = started.slice(1).map((at, i) => at - started[i]);
    expect(Math.min(...gaps), `gaps ${gaps.join(' ')}`).to.be.at.least(95);
    // Even, not slower than it must be: 25 starts in about 2.4 s.
    expect((started.at(-1) as number) - started[0]).to.be.below(4000);
  });

  it('a per-tenant limit in a pooled process holds a flooding tenant to its rate while another tenant runs at its own', async () => {
    await setUp(
      {
        tenants: ['acme', 'globex'],
        limits: { ocr: { per_tenant: true, rate: { limit: 10, period: 'PT1S' } } },
        stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 8, limits: ['ocr'], options: { journal: '' } } },
      },
      LIMITED,
      'flow-per-tenant',
    );
    await rewriteJournal(project, journal);
    run('limited', ['--tenants', 'acme,globex']);
    await publishNaps(project, 'work', 'acme', 120, 5);
    await waitFor('acme under way', async () => starts(await readJournal(journal)).length >= 15, 20_000, 100);
    const globexFrom = Date.now();
    await publishNaps(project, 'work', 'globex', 20, 5);
    await waitFor(
      'globex done',
      async () => starts(await readJournal(journal)).filter((e) => e.tenant === 'globex').length === 20,
      10_000,
      50,
    );
    const entries = await readJournal(journal);
    const globex = starts(entries).filter((entry) => entry.tenant === 'globex');
    // At its own 10 a second from when it was published: acme's backlog held none of it back.
    expect((globex.at(-1) as JournalEntry).at - globexFrom, 'globex took').to.be.below(3500);
    const acme = starts(entries).filter((entry) => entry.tenant === 'acme');
    expect(peakStartsPerWindow(acme, 1000), acme.map((e) => e.at - acme[0].at).join(' ')).to.be.at.most(10);
    expect(
      peakStartsPerWindow(
        entries.filter((entry) => entry.tenant === 'globex'),
        1000,
      ),
    ).to.be.at.most(10);
  });

  it('a job whose key is exhausted does not hold back an unlimited job behind it (RL-004)', async () => {
    await setUp(
      { tenants: ['acme'], stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 2, options: { journal: '' } } } },
      LIMITED,
      'flow-skip',
    );
    await rewriteJournal(project, journal);
    run('limited', ['--tenant', 'acme']);
    const keyed = await publishNaps(project, 'work', 'acme', 4, 2000, { rate_limit: { key: 'one-at-a-time', concurrency: 1 } });
    await waitFor('a keyed job running', async () => starts(await readJournal(journal)).some((e) => keyed.includes(e.job)), 15_000, 50);
    // Behind three keyed jobs waiting for the key, in the same queue and the same process.
    const free = await publishNaps(project, 'work', 'acme', 3, 10);
    await waitFor(
      'the free jobs run',
      async () => starts(await readJournal(journal)).filter((e) => free.includes(e.job)).length === 3,
      15_000,
      50,
    );
    const entries = await readJournal(journal);
    // They ran while the first keyed job still ran alone: none waited for the key.
    expect(starts(entries).filter((entry) => keyed.includes(entry.job))).to.have.length(1);
    expect(entries.filter((entry) => entry.what === 'end' && keyed.includes(entry.job))).to.have.length(0);
    await waitFor(
      'every keyed job run',
      async () => (await readJournal(journal)).filter((e) => e.what === 'end' && keyed.includes(e.job)).length === 4,
      20_000,
      100,
    );
    expect(peakActive((await readJournal(journal)).filter((entry) => keyed.includes(entry.job)))).to.equal(1);
  });

  it("on_limit of a job's own policy: drop discards it unrun once its limit is reached, reschedule sends it back until it fits", async () => {
    await setUp(
      { tenants: ['acme'], stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 4, options: { journal: '' } } } },
      LIMITED,
      'flow-on-limit',
    );
    await rewriteJournal(project, journal);
    run('limited', ['--tenant', 'acme']);
    const policy = (on_limit: string): object => ({ rate_limit: { key: 'single', concurrency: 1, on_limit } });
    const [first] = await publishNaps(project, 'work', 'acme', 1, 1500, policy('wait'));
    await waitFor('the first keyed job running', async () => starts(await readJournal(journal)).some((e) => e.job === first), 15_000, 20);
    const dropped = await publishNaps(project, 'work', 'acme', 3, 5, policy('drop'));
    const rescheduled = await publishNaps(project, 'work', 'acme', 2, 5, policy('reschedule'));
    await waitFor(
      'the rescheduled jobs run',
      async () => starts(await readJournal(journal)).filter((e) => rescheduled.includes(e.job)).length === 2,
      20_000,
      100,
    );
    await waitFor('the queue empty', async () => (await project.raw.count(project.names.queue('work', 'acme'))) === 0, 10_000, 100);
    const entries = await readJournal(journal);
    expect(
      starts(entries).filter((entry) => dropped.includes(entry.job)),
      'dropped jobs run',
    ).to.deep.equal([]);
    const firstEnd = (entries.find((entry) => entry.job === first && entry.what === 'end') as JournalEntry).at;
    for (const entry of starts(entries).filter((e) => rescheduled.includes(e.job))) {
      expect(entry.at, 'a rescheduled job started after the key was free').to.be.at.least(firstEnd);
      expect(entry.attempt).to.equal(1);
    }
    expect(peakActive(entries)).to.equal(1);
  });

  it('a handler told "429 until T" holds its limit in every process until T, and its job runs again then at the same attempt', async () => {
    await setUp(
      {
        tenants: ['acme'],
        limits: { api: { concurrency: 10 } },
        stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 4, limits: ['api'], options: { journal: '' } } },
      },
      LIMITED,
      'flow-429',
    );
    await rewriteJournal(project, journal);
    // Both listening for control messages: a process that connects after a hold was sent does not learn of it.
    await runReady('limited', ['--tenant', 'acme']);
    await runReady('limited', ['--tenant', 'acme']);
    const [limited] = await publishNaps(project, 'work', 'acme', 1, 5, {}, ['429-once', 2000]);
    await waitFor('the 429', async () => starts(await readJournal(journal)).some((entry) => entry.job === limited), 20_000, 20);
    const heldFrom = (starts(await readJournal(journal)).find((entry) => entry.job === limited) as JournalEntry).at;
    const others = await publishNaps(project, 'work', 'acme', 10, 5);
    await waitFor('everything run', async () => (await readJournal(journal)).filter((e) => e.what === 'end').length === 12, 20_000, 50);
    const entries = await readJournal(journal);
    const otherStarts = starts(entries).filter((entry) => others.includes(entry.job));
    // None of the other jobs of the limit started while it was held (both processes obeyed).
    expect(Math.min(...otherStarts.map((entry) => entry.at)) - heldFrom, 'first other start after the 429').to.be.at.least(1950);
    expect(new Set(otherStarts.map((entry) => entry.pid)).size).to.equal(2);
    const again = starts(entries).filter((entry) => entry.job === limited);
    expect(again.map((entry) => entry.attempt)).to.deep.equal([1, 1]);
    expect(again[1].at - heldFrom).to.be.at.least(1950);
  });

  it('GET /ojs/v1/rate-limits/{key} and `stagecoach limits` show a partition; PUT changes the limit in the file and on the broker', async () => {
    await setUp(
      {
        tenants: ['acme'],
        limits: { ocr: { concurrency: 2 } },
        stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 4, limits: ['ocr'], options: { journal: '' } } },
      },
      LIMITED,
      'flow-api',
    );
    await rewriteJournal(project, journal);
    await runReady('limited', ['--tenant', 'acme']);
    const server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL } });
    const get = async (key: string): Promise<{ status: number; body: Record<string, unknown> }> => {
      const response = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/rate-limits/${encodeURIComponent(key)}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    try {
      await publishNaps(project, 'work', 'acme', 4, 10);
      // The management API's statistics lag by up to 5 s.
      const first = await waitFor(
        'the partition seen',
        async () => {
          const answer = await get('ocr');
          // Before the stage took a token, the configured limit is answered with `on_broker: false`.
          return (
            answer.status === 200 &&
            answer.body.on_broker === undefined &&
            (answer.body.concurrency as { tokens: number }).tokens === 2 &&
            answer.body
          );
        },
        20_000,
        500,
      );
      expect(first).to.deep.include({ key: 'ocr', configured: true });
      expect(first.concurrency).to.include({ limit: 2 });
      expect((await get('nope')).status).to.equal(404);

      const put = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/rate-limits/ocr`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ concurrency: 4 }),
      });
      expect(put.status).to.equal(200);
      const file = JSON.parse(await readFile(project.file, 'utf8')) as RawConfig;
      expect(file.limits?.ocr).to.deep.equal({ concurrency: 4 });
      await waitFor(
        '4 tokens on the broker',
        async () => ((await get('ocr')).body.concurrency as { tokens?: number } | undefined)?.tokens === 4,
        20_000,
        500,
      );

      const expiring = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/rate-limits/ocr`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ concurrency: 0, expires_at: '2030-01-01T00:00:00Z' }),
      });
      expect(expiring.status).to.equal(422);
      const cli = await runCli(['limits', '--json', '--config', project.file], { AMQP_URL });
      expect(cli.code, cli.stderr).to.equal(0);
      expect((JSON.parse(cli.stdout) as Array<{ key: string }>).map((report) => report.key)).to.include('ocr');
    } finally {
      await server.close();
    }
  });

  it('queue concurrency raised and lowered through the admin API on running processes takes effect within 1 s', async () => {
    await setUp(
      {
        tenants: ['acme'],
        queues: { work: { concurrency: 2 } },
        stages: { limited: { module: FLOW_STAGES_MODULE, concurrency: 8, options: { journal: '' } } },
      },
      LIMITED,
      'flow-admin',
    );
    await rewriteJournal(project, journal);
    run('limited', ['--tenant', 'acme']);
    run('limited', ['--tenant', 'acme']);
    const server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL } });
    try {
      await publishNaps(project, 'work', 'acme', 200, 200);
      await waitFor('2 running', async () => activeAt(await readJournal(journal), Date.now() - 10) === 2, 20_000, 50);
      expect(await putConcurrency(server, 5)).to.equal(200);
      const raisedAt = Date.now();
      await waitFor('5 running', async () => activeAt(await readJournal(journal), Date.now() - 10) === 5, 5000, 20);
      expect(Date.now() - raisedAt, 'raised in').to.be.below(1000 + 50);
      expect(await putConcurrency(server, 1)).to.equal(200);
      const loweredAt = Date.now();
      // Within 1 s no job starts beyond the new limit; the 200 ms jobs running then end.
      await waitFor('1 s and a job length', () => Date.now() - loweredAt > 1300, 3000, 20);
      await waitFor('2 s more', () => Date.now() - loweredAt > 3300, 3000, 20);
      const entries = await readJournal(journal);
      const after = entries.filter((entry) => entry.at >= loweredAt + 1000);
      const runningThen = activeAt(entries, loweredAt + 1000);
      expect(starts(after).length, 'jobs started after the lowering').to.be.above(0);
      for (let at = loweredAt + 1300; at < loweredAt + 3300; at += 10)
        expect(activeAt(entries, at), `active at +${at - loweredAt} ms (${runningThen} at +1 s)`).to.be.at.most(1);
    } finally {
      await server.close();
    }
  });
});

const TOKEN = 'test-admin-token-flow';

async function putConcurrency(server: AdminServer, concurrency: number): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/queues/work/config`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ concurrency }),
  });
  await response.text();
  return response.status;
}

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
