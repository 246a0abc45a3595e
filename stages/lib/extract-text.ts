import { injectable, NonRetryableError } from '../../src/index.js';
import { pdfText } from './pdf-text.js';

/**
 * Turns a document into the plain text the matcher scans. A class rather than functions so
 * that the converter receives it by injection and a deployment can bind a richer one.
 */
@injectable()
export class TextExtractor {
  readonly mimes: readonly string[] = ['text/plain', 'text/markdown', 'text/html', 'text/csv', 'application/json', 'application/pdf'];

  supports(mime: string): boolean {
    return this.mimes.includes(mime);
  }

  /** @throws NonRetryableError `UnsupportedMime` for a type it has no extractor for: retrying will not add one. */
  async extract(mime: string, bytes: Uint8Array): Promise<string> {
    const text = () => new TextDecoder().decode(bytes);
    switch (mime) {
      case 'text/plain':
      case 'text/markdown':
        return text();
      case 'text/html':
        return htmlText(text());
      case 'text/csv':
        return csvText(text());
      case 'application/json':
        return jsonStrings(JSON.parse(text())).join('\n');
      case 'application/pdf':
        return pdfText(bytes);
      default:
        throw new NonRetryableError(`no text extractor for "${mime}"`, 'UnsupportedMime');
    }
  }
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/**
 * The text a reader sees: script and style bodies and comments dropped, tags replaced by a
 * space (so `<td>a</td><td>b</td>` does not glue cells together), entities decoded. Entities
 * are decoded last so that `&lt;b&gt;` stays text and `billing&#64;x.dk` becomes an address.
 */
export function htmlText(html: string): string {
  return html
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/<(script|style)\b[^>]*>[\s\S]*?<\/\1\s*>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (entity, name: string) => {
      if (name[0] === '#') {
        const code = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
        return code <= 0x10ffff ? String.fromCodePoint(code) : entity;
      }
      return ENTITIES[name.toLowerCase()] ?? entity;
    })
    .replace(/[ \t\r\f\v\u00a0]+/g, ' ')
    .replace(/\s*\n\s*/g, '\n')
    .trim();
}

/**
 * RFC 4180 CSV as tab-separated cells, one row per line. Tabs, because the card pattern allows
 * spaces between digits: cells joined by spaces could merge a card with the next numeric cell.
 */
export function csvText(csv: string): string {
  const lines: string[] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  const endCell = () => {
    row.push(cell);
    cell = '';
  };
  for (let i = 0; i < csv.length; i++) {
    const char = csv[i] as string;
    if (quoted) {
      if (char !== '"') cell += char;
      else if (csv[i + 1] === '"') cell += csv[++i];
      else quoted = false;
    } else if (char === '"') quoted = true;
    else if (char === ',') endCell();
    else if (char === '\n') {
      endCell();
      lines.push(row.join('\t'));
      row = [];
    } else if (char !== '\r') cell += char;
  }
  endCell();
  lines.push(row.join('\t'));
  return lines.filter((line) => line.trim() !== '').join('\n');
}

/**
 * Every string value, depth first. Keys and numbers are left out: identifiers such as card
 * numbers are kept as strings (a 16-digit JSON number need not even survive parsing).
 */
export function jsonStrings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(jsonStrings);
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(jsonStrings);
  return [];
}
