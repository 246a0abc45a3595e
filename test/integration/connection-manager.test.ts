import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ConnectionManager } from '../../src/broker/connection-manager.js';
import { isOpen } from '../../src/broker/connection-state.js';
import type { RawConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { waitFor } from '../helpers/wait-for.js';

const CONFIG_FILE = fileURLToPath(new URL('../../../config/pipeline.json', import.meta.url));
// The dropped connection's error is logged: not printed among the results.
const log = Object.assign(createLogger({ test: 'connection-manager' }, 'error'), { silent: true });

describe('ConnectionManager (broker)', function () {
  this.timeout(30_000);

  it('drop() destroys the connection and reconnects', async () => {
    const raw = JSON.parse(await readFile(CONFIG_FILE, 'utf8')) as RawConfig;
    const config = withTestConfig({ ...raw, broker: { ...raw.broker, reconnect: { initialDelay: 0.1, maxDelay: 0.5 } } }, CONFIG_FILE);
    const manager = new ConnectionManager(config, log, 'stagecoach drop-test');
    try {
      const first = await manager.start();
      manager.drop('test');
      await waitFor('a second connection', () => manager.connections === 2 && manager.connected, 10_000);
      expect(isOpen(first), 'the dropped connection').to.equal(false);
      expect(manager.connection).to.not.equal(first);
    } finally {
      await manager.close(1000);
    }
  });
});
