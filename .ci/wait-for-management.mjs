// Waits (at most 120 s) until the RabbitMQ management API answers with the given credentials:
// enabling the plugin returns before its HTTP listener is up.
const url = new URL(process.argv[2] ?? 'http://guest:guest@127.0.0.1:15672/');
const authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
url.username = '';
url.password = '';
const deadline = Date.now() + 120_000;
for (;;) {
  try {
    const response = await fetch(new URL('api/overview', url), { headers: { authorization }, signal: AbortSignal.timeout(5000) });
    if (response.ok) {
      console.log('ci: management API answers');
      break;
    }
    throw new Error(`status ${response.status}`);
  } catch (err) {
    if (Date.now() > deadline) {
      console.error(`ci: management API did not answer within 120 s: ${err.message}`);
      process.exit(1);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
