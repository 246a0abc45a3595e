import { startAdminServer, type AdminServer, type AdminServerOptions } from '../../src/http-api/admin-server.js';
import type { RawConfig } from '../../src/config/raw-config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { deletePrefix } from '../../src/testing/delete-prefix.js';
import { writeConfigFile, type ConfigFile } from './config-file.js';
import { AMQP_URL } from './raw-broker.js';

/** `stagecoach admin` on a fresh configuration file (no stages), as HTTP workers and producers reach it. */
export interface BindingServer {
  project: ConfigFile;
  server: AdminServer;
  /** `http://127.0.0.1:<port>` */
  base: string;
  /** Closes the server, removes the file and deletes the prefix from the broker. */
  close(): Promise<void>;
}

/**
 * @param options more of the server's options: the configured stages' queues (`stages`, as `stagecoach admin`
 * loads them from their modules; none unless given), webhook delivery timings, limits, `testReset`
 * (serve `POST /ojs/v1/admin/reset`, as `stagecoach admin --test-reset` does).
 */
export async function startBindingServer(
  settings: RawConfig,
  name: string,
  token: string,
  options: Partial<AdminServerOptions> = {},
): Promise<BindingServer> {
  const project = await writeConfigFile(settings, [], name);
  const log = createLogger({ test: name }, 'error');
  const server = await startAdminServer({
    ...options,
    configFile: project.file,
    port: 0,
    token,
    log,
    env: { AMQP_URL },
    stages: options.stages ?? [],
  }).catch(async (err: unknown) => {
    await project.remove();
    throw err;
  });
  return {
    project,
    server,
    base: `http://127.0.0.1:${server.port}`,
    async close() {
      await server.close();
      await project.remove();
      await deletePrefix(AMQP_URL, project.config.broker.management, project.config.prefix);
    },
  };
}
