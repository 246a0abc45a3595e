/**
 * The states of a stage group (the process): `starting` from construction until its first
 * attach begins (connecting, checking tenants, provisioning); `running` from then on, every new
 * connection re-attaching everything; `stopping` from the first `stop()`; `stopped` once it
 * finished. Only forward: a group is started once and stopped once.
 */
export type GroupState = 'starting' | 'running' | 'stopping' | 'stopped';

/**
 * Holds the state and the one stop promise: a second `stop()` (SIGTERM after a `terminate`)
 * gets the first one's promise, so it waits for that shutdown and gets its result instead of
 * running a second.
 */
export class GroupLifecycle {
  private current: GroupState = 'starting';
  private stopped: Promise<boolean> | undefined;

  get state(): GroupState {
    return this.current;
  }

  /** True from the first `stop()` on. */
  get stopping(): boolean {
    return this.current === 'stopping' || this.current === 'stopped';
  }

  /** starting -> running; false (and no change) once stopping. */
  run(): boolean {
    if (this.current !== 'starting') return false;
    this.current = 'running';
    return true;
  }

  /** Runs `shutdown` on the first call only; every call gets its promise. `stopped` even when it fails. */
  stop(shutdown: () => Promise<boolean>): Promise<boolean> {
    this.stopped ??= (async () => {
      this.current = 'stopping';
      try {
        return await shutdown();
      } finally {
        this.current = 'stopped';
      }
    })();
    return this.stopped;
  }
}
