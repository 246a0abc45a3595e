import path from 'node:path';
import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { createLogger } from '../../src/logging/logger.js';
import type { OjsEvent } from '../../src/events/ojs-event.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { convertGate } from '../fixtures/progress-stages.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { EventTap } from '../helpers/event-tap.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/progress-stages.js');
const STAGES = [
  { name: 'converter', input: 'convert', outputs: [] },
  { name: 'threaded', input: 'convert_threaded', outputs: [] },
] as unknown as StageMetadata[];
const TOKEN = 'stage-progress-token';
const log = createLogger({ test: 'stage-progress' }, 'error');

describe('ctx.progress: a native stage reports how far a job got (docs/job-state.md)', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let group: RunningGroup;
  let server: AdminServer;
  let tap: EventTap;

  const info = async (id: string, token = TOKEN): Promise<{ status: number; job?: Record<string, unknown> }> => {
    const response = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/jobs/${id}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await response.json()) as { job?: Record<string, unknown> };
    return { status: response.status, ...(body.job === undefined ? {} : { job: body.job }) };
  };
  const progressEvents = (id: string): OjsEvent[] =>
    tap.events.filter((t) => t.event.type === 'progress.updated' && t.event.subject === id).map((t) => t.event);

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme'],
        queues: {
          convert: { events: true, default_retry: { max_attempts: 1 } },
          convert_threaded: { default_retry: { max_attempts: 1 } },
        },
        stages: { converter: { module: MODULE }, threaded: { module: MODULE, threads: 1 } },
      },
      STAGES,
      'stage-progress',
    );
    tap = await EventTap.open(project.config.broker.url, project.names.events);
    group = await startGroup(
      project.config,
      [
        { stage: 'converter', tenant: 'acme' },
        { stage: 'threaded', tenant: 'acme' },
      ],
      log,
    );
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL } });
  });

  after(async () => {
    convertGate.releaseAll();
    await server?.close();
    await group?.stop();
    await tap?.close();
    await project?.remove();
  });

  it('shows the latest progress while the job runs, one report a second at most, and 1 once completed', async () => {
    const id = await group.publisher.publish('convert', { type: 'convert.pdf', args: ['ok'], tenant: 'acme' });
    const running = await waitFor('INFO shows the job halfway', async () => {
      const { job } = await info(id);
      return job?.state === 'active' && job.progress === 0.5 && job;
    });
    expect(running).to.deep.include({ progress: 0.5, progress_message: 'halfway', tenant: 'acme' });
    // 2,003 calls in one turn: the first report at once, the latest a second later, nothing between.
    const events = await waitFor(
      'progress.updated at 0.5',
      () => progressEvents(id).some((e) => e.data.progress === 0.5) && progressEvents(id),
    );
    expect(events.map((e) => e.data.progress)).to.deep.equal([0.1, 0.5]);
    expect(events.at(-1)?.data).to.deep.include({ progress: 0.5, message: 'halfway', tenant: 'acme', queue: 'convert' });
    const progress = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/jobs/${id}/progress`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(await progress.json()).to.deep.include({ job_id: id, state: 'active', progress: 0.5, message: 'halfway' });
    const status = await runCli(['job', 'status', id, '--config', project.file], { AMQP_URL });
    expect(status.stdout, status.stderr).to.include('progress: 50% (halfway)');
    convertGate.releaseAll();
    const done = await waitFor('INFO shows the job completed', async () => {
      const { job } = await info(id);
      return job?.state === 'completed' && job;
    });
    expect(done).to.deep.include({ progress: 1, progress_message: 'halfway' });
    expect(progressEvents(id)).to.have.length(2);
  });

  it('a failed job keeps how far it got', async () => {
    const id = await group.publisher.publish('convert', { type: 'convert.pdf', args: ['fail'], tenant: 'acme' });
    await waitFor('the job halfway', async () => (await info(id)).job?.progress === 0.5);
    convertGate.releaseAll();
    const failed = await waitFor('INFO shows the job discarded', async () => {
      const { job } = await info(id);
      return job?.state === 'discarded' && job;
    });
    expect(failed).to.deep.include({ progress: 0.5, progress_message: 'halfway' });
  });

  it('a stage in worker threads reports through the main thread', async () => {
    const id = await group.publisher.publish('convert_threaded', { type: 'convert.pdf', args: [], tenant: 'acme' });
    const failed = await waitFor('INFO shows the threaded job discarded', async () => {
      const { job } = await info(id);
      return job?.state === 'discarded' && job;
    });
    expect(failed).to.deep.include({ progress: 0.3, progress_message: 'in a thread' });
  });
});
