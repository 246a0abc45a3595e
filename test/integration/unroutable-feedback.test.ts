import { expect } from 'chai';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { StagecoachError, UnroutableJobError } from '../../src/errors/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { runCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { ojsClient } from '../helpers/ojs-client.js';
import { AMQP_URL } from '../helpers/raw-broker.js';

const log = createLogger({ test: 'unroutable-feedback' }, 'error');
const TOKEN = 'test-unroutable-feedback-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('a producer is told when no queue took its job (kept in unroutable)', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let publisher: Publisher;

  /** The ids of the jobs in the unroutable queue, read and put back. */
  const unroutableIds = async (): Promise<string[]> => {
    const messages = await project.raw.drain(project.names.unroutable);
    for (const message of messages) await project.raw.publish(project.names.unroutable, '', message.content, message.properties);
    return messages.map((message) => message.properties.messageId as string);
  };
  const refusal = (promise: Promise<unknown>): Promise<unknown> =>
    promise.then(
      () => undefined,
      (err: unknown) => err,
    );

  before(async () => {
    project = await writeConfigFile(
      { tenants: ['acme'], queues: { _default: { scope: 'shared' }, work: { scope: 'tenant' }, jobs: {} }, stages: {} },
      [],
      'unroutable-feedback',
    );
    publisher = await Publisher.connect(project.config, { log });
  });

  after(async () => {
    await publisher?.close();
    await project?.remove();
    if (project !== undefined) await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
  });

  it('Publisher: a job to a provisioned, open queue resolves with its id', async () => {
    const id = await publisher.publish('work', { type: 'route.probe', args: [1], tenant: 'acme' });
    expect(id).to.be.a('string');
    expect(await unroutableIds()).to.not.include(id);
  });

  it('Publisher: a tenant job to a shared queue resolves: the one shared queue takes it, whatever tenant it carries', async () => {
    const id = await publisher.publish('jobs', { type: 'route.probe', args: [9], tenant: 'acme' });
    expect(id).to.be.a('string');
    expect(await unroutableIds()).to.not.include(id);
  });

  it('Publisher: a tenant never provisioned rejects with UnroutableJobError, the job kept in unroutable', async () => {
    const err = await refusal(publisher.publish('work', { type: 'route.probe', args: [2], tenant: 'initech' }));
    expect(err).to.be.instanceOf(UnroutableJobError);
    expect(err).to.be.instanceOf(StagecoachError);
    const refused = err as UnroutableJobError;
    expect(refused).to.include({ code: 'UNROUTABLE', reason: 'tenant-not-provisioned', tenant: 'initech', queue: 'work' });
    expect(refused.message).to.contain('initech');
    expect(await unroutableIds()).to.include(refused.jobId);
  });

  it('Publisher: a queue no stage declared rejects, naming the queue', async () => {
    const err = await refusal(publisher.publish('nowhere', { type: 'route.probe', args: [3] }));
    expect(err).to.be.instanceOf(UnroutableJobError);
    expect(err).to.include({ reason: 'queue-not-declared', queue: 'nowhere' });
    expect(await unroutableIds()).to.include((err as UnroutableJobError).jobId);
  });

  it('Publisher: a draining queue rejects, and takes jobs again once resumed', async () => {
    await setQueueState(project.config, { queue: 'work', tenant: 'acme' }, 'draining', log);
    try {
      const err = await refusal(publisher.publish('work', { type: 'route.probe', args: [4], tenant: 'acme' }));
      expect(err).to.be.instanceOf(UnroutableJobError);
      expect(err).to.include({ reason: 'queue-draining', tenant: 'acme' });
      expect(await unroutableIds()).to.include((err as UnroutableJobError).jobId);
    } finally {
      await setQueueState(project.config, { queue: 'work', tenant: 'acme' }, 'active', log);
    }
    expect(await publisher.publish('work', { type: 'route.probe', args: [5], tenant: 'acme' })).to.be.a('string');
  });

  it('`stagecoach publish` to a queue no stage declared exits 1 with a message that says where the job is', async () => {
    const result = await runCli(['publish', 'nowhere', '--type', 'route.probe', '--args', '[6]', '--config', project.file], { AMQP_URL });
    expect(result.code, result.stderr).to.equal(1);
    expect(result.stderr).to.match(/unroutable/);
    expect(result.stderr).to.contain('"nowhere"');
  });

  it('the admin API answers a push to a draining queue with an unroutable error naming why', async () => {
    let server: AdminServer | undefined;
    await setQueueState(project.config, { queue: 'jobs' }, 'draining', log);
    try {
      server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL }, stages: [] });
      const answer = await ojs(`http://127.0.0.1:${server.port}`, 'POST', '/ojs/v1/jobs', {
        type: 'route.probe',
        args: [7],
        options: { queue: 'jobs' },
      });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(409);
      expect(answer.body.error.code).to.equal('unroutable');
      expect(answer.body.error.message).to.contain('draining');
    } finally {
      await server?.close();
      await setQueueState(project.config, { queue: 'jobs' }, 'active', log);
    }
  });
});
