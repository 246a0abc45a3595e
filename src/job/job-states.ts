/** The OJS lifecycle states of a job (seeds/003; docs/job-state.md). `pending`: parked by a paused batch or tenant. */
export type JobState = 'scheduled' | 'available' | 'pending' | 'active' | 'completed' | 'retryable' | 'cancelled' | 'discarded';

export const JOB_STATES: readonly JobState[] = [
  'scheduled',
  'available',
  'pending',
  'active',
  'completed',
  'retryable',
  'cancelled',
  'discarded',
];
