/** Most jobs whose progress one server keeps (the oldest report is forgotten first). */
export const PROGRESS_KEPT = 20_000;

/** A job's latest progress (spec/ojs-progress.md 5): a fraction of 0.0 to 1.0, a message, structured data. */
export interface JobProgress {
  progress: number | null;
  message?: string;
  data?: unknown;
  updated_at: string;
}

/**
 * The progress HTTP workers report for the jobs they hold (`PUT /ojs/v1/jobs/{id}/progress`),
 * kept in this server's memory: progress is information about a running job, lost with the
 * server as the claim is. Numeric progress never goes back (ojs-progress 5.1).
 */
export class ProgressBoard {
  private readonly reports = new Map<string, JobProgress>();

  constructor(private readonly size = PROGRESS_KEPT) {}

  /** Records a report; a lower fraction than the last keeps the last (message and data are the new ones). */
  report(id: string, progress: number | undefined, message: string | undefined, data: unknown): JobProgress {
    const last = this.reports.get(id);
    const fraction = progress === undefined ? (last?.progress ?? null) : Math.max(clamp(progress), last?.progress ?? 0);
    const next: JobProgress = {
      progress: fraction,
      ...(message === undefined ? {} : { message }),
      ...(data === undefined ? {} : { data }),
      updated_at: new Date().toISOString(),
    };
    this.reports.delete(id);
    this.reports.set(id, next);
    if (this.reports.size > this.size) {
      const oldest = this.reports.keys().next();
      if (oldest.done !== true) this.reports.delete(oldest.value);
    }
    return next;
  }

  get(id: string): JobProgress | undefined {
    return this.reports.get(id);
  }

  clear(): void {
    this.reports.clear();
  }
}

/** 0.0 to 1.0, out-of-range values clamped (ojs-progress 5.1: clamped, not refused). */
export function clamp(value: number): number {
  return Math.min(1, Math.max(0, value));
}
