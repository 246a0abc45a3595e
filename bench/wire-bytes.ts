import { createRequire } from 'node:module';
import type { MessageProperties, Options } from 'amqplib';

/** amqplib's own frame encoders (not part of its typed API): the bytes it writes for a publish. */
const require = createRequire(import.meta.url);
const defs = require('amqplib/lib/defs.js') as {
  BasicPublish: number;
  encodeMethod(id: number, channel: number, fields: object): Buffer;
  encodeProperties(id: number, channel: number, size: number, fields: object): Buffer;
};
const args = require('amqplib/lib/api_args.js') as { publish(exchange: string, routingKey: string, options: Options.Publish): object };

/** Frame header (7) and frame end (1) of the one body frame a small message takes. */
const BODY_FRAME_OVERHEAD = 8;
const BASIC_CLASS = 60;

/**
 * What one publish puts on the wire from the client to the broker: the `basic.publish` method
 * frame (exchange and routing key included), the content header frame (properties and headers)
 * and the body frame, as amqplib encodes them. Messages below the frame size (128 KiB) only.
 */
export function publishBytes(exchange: string, routingKey: string, content: Buffer, options: Options.Publish): number {
  const fields = args.publish(exchange, routingKey, options);
  return (
    defs.encodeMethod(defs.BasicPublish, 1, fields).length +
    defs.encodeProperties(BASIC_CLASS, 1, content.length, fields).length +
    content.length +
    BODY_FRAME_OVERHEAD
  );
}

/** The publish options that reproduce a received message's properties. */
export function optionsOf(properties: MessageProperties): Options.Publish {
  const options: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(properties)) if (value !== undefined) options[key] = value;
  return options as Options.Publish;
}
