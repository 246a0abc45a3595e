import { QUEUE_SETTINGS, SETTING_KEYS, type QueueSettingName, type SettingEnforcer } from './queue-setting-declarations.js';

/**
 * What the declared queue settings become in the shipped JSON Schema and in
 * docs/configuration.md. `npm run settings:write` writes both from here; a unit test checks that
 * the shipped files are what these functions give.
 */

/** When a change of a setting applied by each party takes effect. */
const TAKES_EFFECT: Record<SettingEnforcer, string> = {
  policy: 'a policy on the main queues: changes in place with `stagecoach apply`',
  'dead-letter policy': 'a policy on the dead-letter queues: changes in place with `stagecoach apply`',
  'flow tokens': 'every stage reading the queue, through tokens on the broker: changes at once',
  'stage start': 'read by a stage when it starts',
  producers: 'read by producers (`Publisher`, `ctx.emit`, HTTP pushes) at their next job',
  'admin server': 'read by the admin server at each HTTP push',
  tracker: 'read by `stagecoach tracker` when it prunes',
};

/** A setting's default as the docs say it: `unlimited` for none. */
export function defaultText(key: QueueSettingName): string {
  const value: unknown = QUEUE_SETTINGS[key].default;
  if (value === undefined) return 'unlimited';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** `definitions.settings.properties` of the shipped schema. */
export function settingsSchemaProperties(): Record<string, Record<string, unknown>> {
  return Object.fromEntries(
    SETTING_KEYS.map((key) => {
      const { schema, doc, unit } = QUEUE_SETTINGS[key];
      const none = QUEUE_SETTINGS[key].default === undefined && JSON.stringify(schema).includes('"null"') ? ' null: unlimited.' : '';
      const description = `${doc} Unit: ${unit}. Default: ${defaultText(key)}.${none}`;
      return [key, { description, ...schema }];
    }),
  );
}

/** The schema's reference to a setting, as `definitions.queue.properties` holds it. */
export function settingRef(key: string): { $ref: string } {
  return { $ref: `#/definitions/settings/properties/${key}` };
}

/** The cells of docs/configuration.md's queue settings table: a header row, then a row per setting. */
export function settingsTableRows(): string[][] {
  return [
    ['setting', 'default', 'unit', 'applied by', 'what it does'],
    ...SETTING_KEYS.map((key) => {
      const { unit, enforcedBy, doc } = QUEUE_SETTINGS[key];
      const fallback = defaultText(key);
      return [`\`${key}\``, QUEUE_SETTINGS[key].default === undefined ? fallback : `\`${fallback}\``, unit, TAKES_EFFECT[enforcedBy], doc];
    }),
  ];
}

/** The table as markdown (prettier pads it afterwards). */
export function settingsTable(): string {
  const [header, ...rows] = settingsTableRows();
  const line = (cells: string[]): string => `| ${cells.map((cell) => cell.replaceAll('|', '\\|')).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Markers around the generated table in docs/configuration.md. */
export const TABLE_MARKERS = ['<!-- queue-settings:begin (written by npm run settings:write) -->', '<!-- queue-settings:end -->'] as const;

/** The cells of the generated table in a markdown text, as `settingsTableRows` gives them (the separator row left out). */
export function readSettingsTable(markdown: string): string[][] {
  const start = markdown.indexOf(TABLE_MARKERS[0]);
  const end = markdown.indexOf(TABLE_MARKERS[1]);
  if (start < 0 || end < start) return [];
  return markdown
    .slice(start + TABLE_MARKERS[0].length, end)
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|[\s:|-]+\|$/.test(line))
    .map((line) =>
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim().replaceAll('\\|', '|')),
    );
}
