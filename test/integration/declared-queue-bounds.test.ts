import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { QueueFullError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { deleteQueueSettings } from '../../src/plan/queue-settings.js';
import { ManagementClient } from '../../src/broker-management/management-client.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { finished, spawnCli } from '../helpers/cli.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { ojsClient } from '../helpers/ojs-client.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'declared-queue-bounds' }, 'error');
const TOKEN = 'test-declared-bounds-token-0123456789';
const ojs = ojsClient(TOKEN);

/** `max_size` 2 with `reject` on every queue, through `_default`; no `provision` ever runs. */
const SETTINGS = { queues: { _default: { scope: 'shared' as const, max_size: 2 } } };

describe('queue bounds hold on a queue first declared by a push or a stage, without provision', function () {
  this.timeout(90_000);
  let project: ConfigFile | undefined;

  afterEach(async () => {
    if (project === undefined) return;
    await deleteQueueSettings(project.config, new ManagementClient(project.config.broker.management));
    await project.remove();
    await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
    project = undefined;
  });

  it('a push through the HTTP binding to a new queue: its third job is refused as QUEUE_FULL', async () => {
    project = await writeConfigFile({ ...SETTINGS, stages: {} }, [], 'declared-bounds-push');
    let server: AdminServer | undefined;
    try {
      server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
      const base = `http://127.0.0.1:${server.port}`;
      const statuses: number[] = [];
      const codes: unknown[] = [];
      for (const n of [1, 2, 3]) {
        const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'bound.probe', args: [n], options: { queue: 'burst' } });
        statuses.push(answer.status);
        codes.push(answer.body.error?.code);
      }
      expect(statuses).to.deep.equal([201, 201, 429]);
      expect(codes[2]).to.equal('QUEUE_FULL');
      expect(await project.raw.count(project.names.queue('burst'))).to.equal(2);
    } finally {
      await server?.close();
    }
  });

  it('a queue declared by `stagecoach run` of its stage: a producer is refused its third job', async () => {
    project = await writeConfigFile({ ...SETTINGS, stages: { fragile: { module: FAILURE_STAGES_MODULE } } }, [], 'declared-bounds-stage');
    const queue = project.names.queue('fragile');
    expect(await project.raw.exists(queue), 'nothing declared the queue before the stage').to.equal(false);
    const stage = spawnCli(['run', 'fragile', '--config', project.file], { AMQP_URL });
    await waitFor('the stage consuming', () => stage.err.includes('stage consuming') || stage.out.includes('stage consuming'), 30_000);
    stage.kill('SIGTERM');
    expect((await finished(stage, 20_000, 'run fragile')).code).to.equal(0);
    const publisher = await Publisher.connect(project.config, { log });
    try {
      await publisher.publish('fragile', { type: 'bound.probe', args: [1] });
      await publisher.publish('fragile', { type: 'bound.probe', args: [2] });
      const refused = await publisher.publish('fragile', { type: 'bound.probe', args: [3] }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).to.be.instanceOf(QueueFullError);
    } finally {
      await publisher.close();
    }
    expect(await project.raw.count(queue)).to.equal(2);
  });
});
