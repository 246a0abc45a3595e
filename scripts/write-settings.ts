/**
 * Writes what the declared queue settings (src/config/queue-setting-declarations.ts) become in the
 * shipped JSON Schema and in docs/configuration.md's queue settings table: `npm run settings:write`.
 * test/unit/queue-setting-declarations.test.ts fails until it has run after a change.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { settingRef, settingsSchemaProperties, settingsTable, TABLE_MARKERS } from '../src/config/queue-setting-docs.js';
import { SETTING_KEYS } from '../src/config/queue-setting-declarations.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Schema {
  definitions: { settings: { properties: Record<string, unknown> }; queue: { properties: Record<string, unknown> } };
}

const schemaPath = path.join(root, 'schema/stagecoach.schema.json');
const schema = JSON.parse(await readFile(schemaPath, 'utf8')) as Schema;
schema.definitions.settings.properties = settingsSchemaProperties();
// A queue takes every setting by reference; references to settings no longer declared go.
const queue = schema.definitions.queue.properties;
for (const [key, value] of Object.entries(queue)) {
  const ref = (value as { $ref?: unknown }).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/definitions/settings/properties/') && !(SETTING_KEYS as string[]).includes(key))
    delete queue[key];
}
for (const key of SETTING_KEYS) queue[key] = settingRef(key);
await writeFile(schemaPath, `${JSON.stringify(schema, null, 2)}\n`);

const docsPath = path.join(root, 'docs/configuration.md');
const docs = await readFile(docsPath, 'utf8');
const [begin, end] = TABLE_MARKERS;
const start = docs.indexOf(begin);
const stop = docs.indexOf(end);
if (start < 0 || stop < start) throw new Error(`docs/configuration.md has no ${begin} ... ${end} markers`);
await writeFile(docsPath, `${docs.slice(0, start + begin.length)}\n\n${settingsTable()}\n\n${docs.slice(stop)}`);
console.log('wrote schema/stagecoach.schema.json and docs/configuration.md; prettier formats them next');
