/**
 * OJS name patterns, as in `allowed_job_types` and `non_retryable_errors`: `*` matches
 * everything, `prefix.*` everything below `prefix.`, anything else itself.
 */
export function matchesPattern(pattern: string, name: string): boolean {
  if (pattern === '*' || pattern === name) return true;
  return pattern.endsWith('.*') && name.startsWith(pattern.slice(0, -1));
}

export function matchesAny(patterns: readonly string[], name: string): boolean {
  return patterns.some((pattern) => matchesPattern(pattern, name));
}
