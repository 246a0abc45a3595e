import type { CompiledConfig } from '../config/config.types.js';
import { DEFAULT_JOB_RETENTION } from '../config/defaults.js';
import { settingsFor } from '../config/queue-resolver.js';
import { parseDuration } from '../util/duration.js';
import type { JobRow, RetentionOf } from './job-lifecycle.js';
import type { JobStore } from './job-store.js';
import { MemoryJobStore } from './memory-job-store.js';
import { PostgresJobStore } from './postgres-job-store.js';

/** The job store `tracking.store` names (docs/job-state.md). */
export function createJobStore(config: CompiledConfig): JobStore {
  const store = config.tracking.store;
  const retention = retentionOf(config);
  return store.kind === 'postgres'
    ? new PostgresJobStore(store.url, store.table, retention, config.tracking.maxAgeSeconds * 1000)
    : new MemoryJobStore(retention);
}

/**
 * How long an ended job is kept: its queue's `retention` for its tenant and end state, else the
 * default (DEFAULT_JOB_RETENTION). Durations are parsed once per queue, tenant and state.
 */
export function retentionOf(config: CompiledConfig): RetentionOf {
  const known = new Map<string, number | undefined>();
  return (row: JobRow) => {
    const state = row.state as keyof typeof DEFAULT_JOB_RETENTION;
    if (!(state in DEFAULT_JOB_RETENTION)) return undefined;
    const key = `${row.queue ?? ''}\u0000${row.tenant ?? ''}\u0000${state}`;
    if (known.has(key)) return known.get(key);
    const settings = row.queue === undefined ? undefined : settingsFor(config, row.queue, row.tenant);
    const ms = parseDuration(settings?.retention?.[state] ?? DEFAULT_JOB_RETENTION[state]);
    known.set(key, ms);
    return ms;
  };
}
