import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Has the broker itself close every client connection whose name contains `tag` (stagecoach
 * names its connections `<what> [<prefix>]`), as a broker restart or an operator would.
 * Uses rabbitmqctl, which needs no management plugin.
 * @returns how many connections were closed.
 */
export async function closeConnections(tag: string, reason = 'closed by test'): Promise<number> {
  // One line per connection: its pid (in the form close_connection takes), then the client
  // properties, connection_name among them.
  const { stdout } = await run('rabbitmqctl', ['list_connections', 'pid', 'client_properties', '-q', '--no-table-headers']);
  const pids = stdout
    .split('\n')
    .filter((line) => line.includes(tag))
    .map((line) => line.split('\t')[0].trim());
  for (const pid of pids) await run('rabbitmqctl', ['close_connection', pid, reason]);
  return pids.length;
}
