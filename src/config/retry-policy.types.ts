/** An OJS retry policy (OJS core "Retry policies"). Durations are ISO 8601 (`PT1S`). */
/** A retry policy with every field set but `backoff_strategy` (unset: `exponential`, so compiled policies keep their shape). */
export type DefaultedRetryPolicy = Required<Omit<RetryPolicy, 'backoff_strategy'>> & Pick<RetryPolicy, 'backoff_strategy'>;

export interface RetryPolicy {
  /** All attempts, the first included; 1 means no retry. @defaultValue 3 */
  max_attempts?: number;
  /** Wait before the second attempt, ISO 8601. @defaultValue "PT1S" */
  initial_interval?: string;
  /** Multiplier for each further wait (the exponent for `polynomial`). @defaultValue 2 */
  backoff_coefficient?: number;
  /**
   * How the wait grows (OJS retry section 3, the `backoff_strategy` extension field): `exponential`
   * `initial_interval * backoff_coefficient^(n-1)`, `polynomial` `initial_interval * n^backoff_coefficient`,
   * `linear` `initial_interval * n`, `none` `initial_interval`. @defaultValue "exponential"
   */
  backoff_strategy?: 'exponential' | 'polynomial' | 'linear' | 'none';
  /** Upper bound of any wait, ISO 8601. @defaultValue "PT5M" */
  max_interval?: string;
  /** Multiply each wait by a random factor in [0.5, 1.5). @defaultValue true */
  jitter?: boolean;
  /** Error types that are never retried; `prefix.*` matches by prefix. @defaultValue [] */
  non_retryable_errors?: string[];
  /** What happens when attempts run out. @defaultValue "dead_letter" */
  on_exhaustion?: 'dead_letter' | 'discard';
}
