import { StagecoachError } from '../errors/errors.js';
import type { Permissions, TopicPermission } from './permissions.js';

/** The management URL without its password, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
}

/**
 * A small client of the RabbitMQ management HTTP API (`rabbitmq_management` plugin), for broker
 * users and their permissions. Credentials travel in the Authorization header (fetch refuses a
 * URL that carries them). Errors name the call and the answer's status, never a request body:
 * a body may hold a password.
 */
export class ManagementApi {
  private readonly base: URL;
  private readonly authorization: string | undefined;
  private readonly shown: string;

  /** @param url e.g. `http://guest:guest@localhost:15672/` (`broker.management`). */
  constructor(
    url: string,
    private readonly timeoutMs = 10_000,
  ) {
    const parsed = new URL(url);
    this.shown = redactUrl(url);
    if (parsed.username !== '') {
      const credentials = `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`;
      this.authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
    }
    parsed.username = '';
    parsed.password = '';
    if (!parsed.pathname.endsWith('/')) parsed.pathname += '/';
    this.base = parsed;
  }

  async userExists(user: string): Promise<boolean> {
    return (await this.call('GET', `users/${encodeURIComponent(user)}`, undefined, [404])) === 200;
  }

  /** Creates the user, or replaces its password (and clears its tags) when it exists. */
  async putUser(user: string, password: string): Promise<void> {
    await this.call('PUT', `users/${encodeURIComponent(user)}`, { password, tags: '' });
  }

  /** Deletes the user, its permissions and its connections; a missing user is not an error. */
  async deleteUser(user: string): Promise<void> {
    await this.call('DELETE', `users/${encodeURIComponent(user)}`, undefined, [404]);
  }

  async putPermissions(vhost: string, user: string, permissions: Permissions): Promise<void> {
    await this.call('PUT', `permissions/${encodeURIComponent(vhost)}/${encodeURIComponent(user)}`, permissions);
  }

  /** Sets the user's topic permission on one exchange (one per exchange; replaces the previous). */
  async putTopicPermission(vhost: string, user: string, topic: TopicPermission): Promise<void> {
    await this.call('PUT', `topic-permissions/${encodeURIComponent(vhost)}/${encodeURIComponent(user)}`, topic);
  }

  /**
   * One call. `tolerated` statuses are answers, not failures.
   * @returns the HTTP status.
   */
  private async call(method: string, path: string, body?: object, tolerated: number[] = []): Promise<number> {
    const what = `${method} /api/${path}`;
    let response: Response;
    try {
      response = await fetch(new URL(`api/${path}`, this.base), {
        method,
        headers: {
          ...(this.authorization === undefined ? {} : { authorization: this.authorization }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const cause = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
      throw new StagecoachError(
        'MANAGEMENT_FAILED',
        `management API ${what} at ${this.shown} failed: ${cause} (is the rabbitmq_management plugin enabled?)`,
        { cause: err },
      );
    }
    if (response.ok || tolerated.includes(response.status)) {
      await response.body?.cancel();
      return response.status;
    }
    throw new StagecoachError(
      'MANAGEMENT_FAILED',
      `management API ${what} at ${this.shown} answered ${response.status} ${response.statusText}${await reason(response)}`,
    );
  }
}

/** The broker's own `reason` (it never echoes a request body), shortened. */
async function reason(response: Response): Promise<string> {
  try {
    const answer = (await response.json()) as { reason?: unknown };
    return typeof answer.reason === 'string' ? `: ${answer.reason.slice(0, 200)}` : '';
  } catch {
    return '';
  }
}
