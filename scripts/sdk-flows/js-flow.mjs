// The JS SDK's README flows (openjobspec/ojs-js-sdk) against `stagecoach admin`. Run by
// scripts/sdk-flows/run.sh, which starts the server; prints one line per step, `ok` or `FAIL`,
// and exits 1 when a step failed. The SDK: OJS_JS_SDK (a path to its dist/esm/index.js), else
// the package @openjobspec/sdk.
import { pathToFileURL } from 'node:url';

const sdk = await import(process.env.OJS_JS_SDK === undefined ? '@openjobspec/sdk' : pathToFileURL(process.env.OJS_JS_SDK).href);
const { OJSClient, OJSWorker } = sdk;
const url = process.env.OJS_URL ?? 'http://127.0.0.1:9642';
const auth = `Bearer ${process.env.OJS_TOKEN}`;
const failures = [];
const check = (step, ok, detail = '') => {
  console.log(`js: ${ok ? 'ok  ' : 'FAIL'} ${step}${ok ? '' : `: ${JSON.stringify(detail)}`}`);
  if (!ok) failures.push(step);
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const client = new OJSClient({ url, auth });
const job = await client.enqueue('email.send', { to: 'user@example.com' });
check('enqueue', typeof job.id === 'string' && job.state === 'available', job);

const delayed = await client.enqueue(
  'report.generate',
  { id: 42 },
  {
    queue: 'reports.v1',
    delay: '5m',
    retry: { maxAttempts: 5, backoff: 'exponential' },
    unique: { key: ['id'], period: 'PT1H' },
    tags: ['monthly'],
  },
);
check(
  'enqueue with options (dotted queue, delay, retry, unique key, tags)',
  delayed.state === 'scheduled' && delayed.tags?.[0] === 'monthly',
  delayed,
);
try {
  await client.enqueue('report.generate', { id: 42, locale: 'da' }, { queue: 'reports.v1', unique: { key: ['id'], period: 'PT1H' } });
  check("a unique job's duplicate is refused", false, 'accepted');
} catch (error) {
  check("a unique job's duplicate is refused", error.code === 'duplicate' || /duplicate/i.test(error.message), error.message);
}
const cancelled = await client.cancelJob(delayed.id);
check('cancelJob', cancelled.state === 'cancelled', cancelled);

const batch = await client.enqueueBatch([
  { type: 'email.send', args: { to: 'a@example.com' } },
  { type: 'email.send', args: { to: 'b@example.com' } },
]);
check('enqueueBatch', batch.length === 2, batch);

// A timeout: the SDK's worker reads `timeout` as milliseconds (docs/http-binding.md); the job
// carries timeout_ms beside it, and a handler that keeps to ctx.job.timeout_ms is not cut short.
const timed = await client.enqueue('slow.job', [1], { timeout: 5000 });
const expiring = await client.enqueue('email.send', { to: 'late@example.com' }, { expiresAt: new Date(Date.now() + 1000).toISOString() });
const relative = await client.enqueue('email.send', { to: 'later@example.com' }, { delay: 'PT2S' });
check('a delay given as an ISO 8601 duration', relative.state === 'scheduled', relative);
await sleep(1500); // past its expires_at before the worker runs
const flaky = await client.enqueue('flaky.job', [1], { retry: { maxAttempts: 3, initialInterval: 'PT1S' } });
const seen = { email: 0, slow: undefined, flaky: 0 };
const worker = new OJSWorker({ url, auth, queues: ['default'], concurrency: 4, pollInterval: 200 });
worker.register('email.send', async () => {
  seen.email++;
  return { sent: true };
});
worker.register('slow.job', async (ctx) => {
  await sleep(100); // past `timeout` (5) read as milliseconds, within its 5 s
  seen.slow = { timeout: ctx.job.timeout, timeout_ms: ctx.job.timeout_ms, aborted: ctx.signal.aborted };
  return { ok: true };
});
worker.register('flaky.job', async (ctx) => {
  seen.flaky++;
  if (ctx.attempt === 1) throw new Error('fails once');
  return { attempt: ctx.attempt };
});
await worker.start();
const deadline = Date.now() + 30_000;
while (Date.now() < deadline) {
  const [a, b, c, d] = await Promise.all([timed, flaky, expiring, relative].map((job) => client.getJob(job.id)));
  if (a.state === 'completed' && b.state === 'completed' && c.state === 'discarded' && d.state === 'completed' && seen.email >= 4) break;
  await sleep(500);
}
await worker.stop();
check('a worker acks', seen.email >= 4, seen);
check('a job past its expires_at is discarded unrun', (await client.getJob(expiring.id)).state === 'discarded');
check('a delayed job runs when due', (await client.getJob(relative.id)).state === 'completed');
check('a fetched job has timeout (s) and timeout_ms', seen.slow?.timeout === 5 && seen.slow?.timeout_ms === 5000, seen.slow);
console.log(`js: note the SDK aborted ctx.signal after ${seen.slow?.timeout} ms: ${seen.slow?.aborted} (its defect; the handler ran on)`);
const retried = await client.getJob(flaky.id);
check('a failed job is retried and completes', retried.state === 'completed' && retried.attempt === 2, retried);
process.exit(failures.length > 0 ? 1 : 0);
