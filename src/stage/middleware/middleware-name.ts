/** How errors name a middleware: its position in its chain (from 1) and its function name. */
export function middlewareName(middleware: (...args: never[]) => unknown, index: number): string {
  return `#${index + 1} (${middleware.name || 'anonymous'})`;
}
