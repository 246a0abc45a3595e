import { readFile } from 'node:fs/promises';
import type { ResultLine } from '../exporter.stage.js';

/**
 * The exporter's lines of one scan in a results file, one per document (a document seen twice,
 * after a redelivery, counts once), sorted by document name. A missing file has none.
 */
export async function readScanResults(file: string, scanId: string): Promise<ResultLine[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const byDocument = new Map<string, ResultLine>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const result = JSON.parse(line) as ResultLine;
    if (result.scan_id === scanId) byDocument.set(result.document, result);
  }
  return [...byDocument.values()].sort((a, b) => a.document.localeCompare(b.document));
}

/** True once every document the explorer counted for the scan has its line. */
export function scanComplete(results: readonly ResultLine[]): boolean {
  return results.length > 0 && results.length === results[0]?.scan_total;
}
