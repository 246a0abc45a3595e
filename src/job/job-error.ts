import type { JobError } from './job.types.js';

/** The OJS structured error of anything a handler threw. */
export function toJobError(err: unknown): JobError {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const type = (err as { type?: unknown }).type;
    return {
      type: typeof type === 'string' ? type : typeof code === 'string' && code !== 'HANDLER_ERROR' ? code : err.name,
      message: err.message,
      backtrace: (err.stack ?? '')
        .split('\n')
        .slice(1)
        .map((line) => line.trim())
        .filter(Boolean),
    };
  }
  return { type: 'Error', message: String(err) };
}
