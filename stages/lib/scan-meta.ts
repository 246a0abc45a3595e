/**
 * What every job of one scan carries in `meta`, from the explorer to the exporter, so that a
 * consumer of the results can tell when a scan is complete: `scan_total` documents with the
 * same `scan_id`.
 */
export interface ScanMeta {
  scan_id: string;
  scan_total: number;
}

/** Picks the scan fields out of a job's meta (the rest, e.g. `parent_id`, is per job). */
export function scanMeta(meta: Record<string, unknown>): Partial<ScanMeta> {
  const picked: Partial<ScanMeta> = {};
  if (typeof meta.scan_id === 'string') picked.scan_id = meta.scan_id;
  if (typeof meta.scan_total === 'number') picked.scan_total = meta.scan_total;
  return picked;
}
