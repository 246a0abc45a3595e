// Waits (at most 120 s) until the broker accepts an AMQP connection and a channel.
import amqplib from 'amqplib';

const url = process.argv[2] ?? 'amqp://guest:guest@127.0.0.1:5672/';
const deadline = Date.now() + 120_000;
for (;;) {
  try {
    const connection = await amqplib.connect(url);
    await (await connection.createChannel()).close();
    await connection.close();
    console.log('ci: broker answers');
    break;
  } catch (err) {
    if (Date.now() > deadline) {
      console.error(`ci: broker did not answer within 120 s: ${err.message}`);
      process.exit(1);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
