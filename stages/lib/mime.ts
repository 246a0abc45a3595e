import path from 'node:path';

/** The document types the converter understands, by file extension. */
export const MIME_BY_EXTENSION: Readonly<Record<string, string>> = {
  '.txt': 'text/plain',
  '.md': 'text/markdown',
  '.html': 'text/html',
  '.htm': 'text/html',
  '.csv': 'text/csv',
  '.json': 'application/json',
  '.pdf': 'application/pdf',
};

export const UNKNOWN_MIME = 'application/octet-stream';

export function mimeOf(fileName: string): string {
  return MIME_BY_EXTENSION[path.extname(fileName).toLowerCase()] ?? UNKNOWN_MIME;
}
