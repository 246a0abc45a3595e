#!/usr/bin/env node
// `npm run clean:broker`: deletes from the local RabbitMQ what interrupted runs left behind, every
// queue and exchange whose name starts with `test-` (integration tests), `smoke.` (smoke runs) or
// `bench-` (benchmarks). A finished run deletes its own prefix; one killed halfway (Ctrl-C, a
// timeout) does not. Lists the names with `rabbitmqctl` (so it runs on the broker's machine, with
// the rights to call it) and deletes them over AMQP as guest on 127.0.0.1:5672. Never part of
// `npm test`: other runs on the same broker would lose their queues.
import amqplib from 'amqplib';
import { execFileSync } from 'node:child_process';
const queues = execFileSync('rabbitmqctl', ['list_queues', '-q', 'name'])
  .toString()
  .split('\n')
  .slice(1)
  .map((s) => s.trim())
  .filter((n) => /^(test-|smoke\.|bench-)/.test(n));
const exchanges = execFileSync('rabbitmqctl', ['list_exchanges', '-q', 'name'])
  .toString()
  .split('\n')
  .slice(1)
  .map((s) => s.trim())
  .filter((n) => /^(test-|smoke\.|bench-)/.test(n));
const c = await amqplib.connect('amqp://guest:guest@127.0.0.1:5672/');
const ch = await c.createChannel();
for (const q of queues) await ch.deleteQueue(q);
for (const e of exchanges) await ch.deleteExchange(e);
await c.close();
console.log('deleted', queues.length, 'queues', exchanges.length, 'exchanges');
