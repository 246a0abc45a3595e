import type { BrokerBinding, BrokerExchange, ManagementClient } from '../broker-management/management-client.js';

/**
 * Whether a message published now would arrive in a queue, worked out from the broker's own
 * exchanges and bindings (read through the management API) the way the broker routes: an
 * exchange's bindings that match by its type, exchange-to-exchange bindings followed, and an
 * exchange whose bindings match nothing handing the message to its alternate exchange.
 *
 * It is what `unroutable replay` needs before it takes a job out of the unroutable queue:
 * publishing cannot tell, since every stagecoach entry exchange has `<prefix>.unroutable` as its
 * alternate exchange, so a job no queue takes is still "routed" (and confirmed, and never
 * returned to a `mandatory` publisher): back into the queue it came from. The unroutable
 * queue itself (`unroutable`) therefore does not count as a queue the job arrived in.
 *
 * Exchanges and their bindings are read once per check object (one replay run): a binding made or
 * removed after that is not seen, and a job then goes where the broker sends it.
 */
export class RouteCheck {
  private readonly exchanges = new Map<string, Promise<BrokerExchange | undefined>>();
  private readonly bindings = new Map<string, Promise<BrokerBinding[]>>();

  constructor(
    private readonly api: ManagementClient,
    private readonly vhost: string,
    private readonly unroutable: string,
  ) {}

  /** True when the message would arrive in at least one queue other than `unroutable`. */
  async arrives(exchange: string, routingKey: string, headers: Record<string, unknown>): Promise<boolean> {
    const queues = await this.route(exchange, routingKey, headers, new Set());
    return [...queues].some((queue) => queue !== this.unroutable);
  }

  private async route(name: string, routingKey: string, headers: Record<string, unknown>, seen: Set<string>): Promise<Set<string>> {
    const queues = new Set<string>();
    if (seen.has(name)) return queues;
    seen.add(name);
    const exchange = await this.exchange(name);
    if (exchange === undefined) return queues;
    const matched = (await this.bindingsOf(name)).filter((binding) => matches(exchange.type, binding, routingKey, headers));
    if (matched.length === 0) {
      const alternate = exchange.arguments?.['alternate-exchange'];
      return typeof alternate === 'string' ? this.route(alternate, routingKey, headers, seen) : queues;
    }
    for (const binding of matched) {
      if (binding.destination_type === 'queue') queues.add(binding.destination);
      else for (const queue of await this.route(binding.destination, routingKey, headers, seen)) queues.add(queue);
    }
    return queues;
  }

  private exchange(name: string): Promise<BrokerExchange | undefined> {
    let found = this.exchanges.get(name);
    if (found === undefined) {
      found = this.api.getExchange(this.vhost, name);
      this.exchanges.set(name, found);
    }
    return found;
  }

  private bindingsOf(name: string): Promise<BrokerBinding[]> {
    let found = this.bindings.get(name);
    if (found === undefined) {
      found = this.api.bindingsFrom(this.vhost, name);
      this.bindings.set(name, found);
    }
    return found;
  }
}

/** Whether one binding of an exchange of `type` takes a message; an exchange type stagecoach never declares is taken to match. */
export function matches(type: string, binding: BrokerBinding, routingKey: string, headers: Record<string, unknown>): boolean {
  switch (type) {
    case 'direct':
      return binding.routing_key === routingKey;
    case 'fanout':
      return true;
    case 'topic':
      return topicMatches(binding.routing_key.split('.'), routingKey.split('.'));
    case 'headers':
      return headersMatch(binding.arguments ?? {}, headers);
    default:
      return true;
  }
}

/** AMQP topic matching: `*` is one word, `#` zero or more. */
function topicMatches(pattern: readonly string[], words: readonly string[]): boolean {
  if (pattern.length === 0) return words.length === 0;
  const [head, ...rest] = pattern;
  if (head === '#') {
    for (let skip = 0; skip <= words.length; skip++) if (topicMatches(rest, words.slice(skip))) return true;
    return false;
  }
  if (words.length === 0) return false;
  return (head === '*' || head === words[0]) && topicMatches(rest, words.slice(1));
}

/**
 * RabbitMQ's headers exchange: `x-match` `all` (the default) or `any`; arguments that begin with
 * `x-` are ignored unless it is `all-with-x` or `any-with-x`; an argument without a value
 * (null) matches a header that is present with any value.
 */
function headersMatch(args: Record<string, unknown>, headers: Record<string, unknown>): boolean {
  const mode = typeof args['x-match'] === 'string' ? args['x-match'] : 'all';
  const withX = mode.endsWith('-with-x');
  const keys = Object.keys(args).filter((key) => key !== 'x-match' && (withX || !key.startsWith('x-')));
  const one = (key: string): boolean => {
    if (!(key in headers)) return false;
    const wanted = args[key];
    return wanted === null || wanted === undefined || same(wanted, headers[key]);
  };
  return mode.startsWith('any') ? keys.some(one) : keys.every(one);
}

function same(wanted: unknown, value: unknown): boolean {
  const plain = Buffer.isBuffer(value) ? value.toString('utf8') : value;
  return wanted === plain;
}
