import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { configView } from '../../src/http-api/queue-views.js';
import { compileConfig, SCHEMA_PATH } from '../../src/config/compile-config.js';
import { QUEUE_SETTINGS, SETTING_KEYS, SYSTEM_QUEUE_SETTINGS } from '../../src/config/queue-setting-declarations.js';
import { readSettingsTable, settingRef, settingsSchemaProperties, settingsTableRows } from '../../src/config/queue-setting-docs.js';
import { layerSettings, settingsFor } from '../../src/config/queue-resolver.js';
import { ConfigError } from '../../src/errors/errors.js';

const WRITE = 'out of date: run `npm run settings:write`';

interface ShippedSchema {
  definitions: { settings: { properties: Record<string, unknown> }; queue: { properties: Record<string, { $ref?: string }> } };
}

/** A value of each setting that differs from its default, to see it travel through every layer. */
const SAMPLES: Record<(typeof SETTING_KEYS)[number], unknown> = {
  max_size: 7,
  max_size_bytes: 4096,
  max_size_warning: 0.5,
  overflow_policy: 'drop_oldest',
  block_timeout: 'PT5S',
  dead_letter_ttl: 'P2D',
  dead_letter_max_size: 9,
  concurrency: 3,
  rate_limit: { limit: 4, period: 'PT1S' },
  events: true,
  tracking: false,
  retention: { completed: 'P1D' },
};

describe('queue settings, declared once', () => {
  it('the shipped JSON Schema holds exactly the declared settings, and a queue takes each by reference', async () => {
    const schema = JSON.parse(await readFile(SCHEMA_PATH, 'utf8')) as ShippedSchema;
    expect(schema.definitions.settings.properties, `schema/stagecoach.schema.json ${WRITE}`).to.deep.equal(settingsSchemaProperties());
    const refs = Object.entries(schema.definitions.queue.properties).filter(([, value]) =>
      value.$ref?.startsWith('#/definitions/settings/'),
    );
    expect(Object.fromEntries(refs), `schema/stagecoach.schema.json ${WRITE}`).to.deep.equal(
      Object.fromEntries(SETTING_KEYS.map((key) => [key, settingRef(key)])),
    );
  });

  it("docs/configuration.md's queue settings table is the declarations'", async () => {
    const docs = await readFile(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');
    expect(readSettingsTable(docs), `docs/configuration.md ${WRITE}`).to.deep.equal(settingsTableRows());
  });

  it('every declared default is valid against its own schema, and is the system default', () => {
    for (const key of SETTING_KEYS) {
      const fallback = QUEUE_SETTINGS[key].default;
      if (fallback === undefined) continue;
      expect(() => compileConfig({ queues: { q: { [key]: fallback } } }), key).not.to.throw();
      expect((SYSTEM_QUEUE_SETTINGS as Record<string, unknown>)[key], key).to.deep.equal(fallback);
    }
    // A setting with no default is unlimited: absent once layered.
    const bare = layerSettings();
    for (const key of SETTING_KEYS) {
      if (QUEUE_SETTINGS[key].default === undefined) expect(bare, key).not.to.have.property(key);
      else expect(bare, key).to.have.deep.property(key, QUEUE_SETTINGS[key].default);
    }
  });

  it('each setting is taken from a queue, from _default and from a tenant, and shown by the admin API', () => {
    for (const key of SETTING_KEYS) {
      const value = SAMPLES[key];
      const viaQueue = compileConfig({ queues: { q: { [key]: value } } });
      expect(settingsFor(viaQueue, 'q'), `queues.q.${key}`).to.have.deep.property(key, value);
      const viaDefault = compileConfig({ queues: { _default: { [key]: value }, q: {} } });
      expect(settingsFor(viaDefault, 'q'), `queues._default.${key}`).to.have.deep.property(key, value);
      const viaTenant = compileConfig({ tenants: [{ name: 'acme', queues: { q: { [key]: value } } }], queues: { q: {} } });
      expect(settingsFor(viaTenant, 'q', 'acme'), `tenants.acme.queues.q.${key}`).to.have.deep.property(key, value);
      expect(configView(viaTenant, 'q', 'acme'), `the view of ${key}`).to.have.deep.property(key, value);
    }
  });

  it('null removes a setting inherited from _default, and the view says null', () => {
    for (const key of SETTING_KEYS) {
      const nullable = JSON.stringify(QUEUE_SETTINGS[key].schema).includes('"null"');
      if (!nullable) {
        expect(() => compileConfig({ queues: { q: { [key]: null } } }), key).to.throw(ConfigError);
        continue;
      }
      const config = compileConfig({ queues: { _default: { [key]: SAMPLES[key] }, q: { [key]: null } } });
      expect(settingsFor(config, 'q'), key).not.to.have.property(key);
      expect(configView(config, 'q'), key).to.have.property(key, null);
    }
  });

  it('a tenant may not set anything for a shared queue', () => {
    for (const key of SETTING_KEYS) {
      expect(
        () => compileConfig({ tenants: [{ name: 'acme', queues: { s: { [key]: SAMPLES[key] } } }], queues: { s: { scope: 'shared' } } }),
        key,
      ).to.throw(ConfigError, /shared/);
    }
  });
});
