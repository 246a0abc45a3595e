/**
 * Which of some flags are set now, asked by name (a topology's binding carries its drain flag's
 * name, see BindingSpec.drainMarker). Two sources: passive declares on a connection
 * ({@link BrokerFlags}, no permission needed: stages) and one management listing per question
 * ({@link ListedFlags}: `provision` and pooled stages, which have management access).
 *
 * Invariant: the answer reflects every flag set before the question was asked. The race argument
 * of declareTopology (a declaration never reopens the entry of a queue being drained) rests on it.
 */
export interface FlagReader {
  /** The subset of `names` whose objects exist on the broker now. */
  present(names: readonly string[]): Promise<Set<string>>;
  /** Releases what the source holds (a channel). */
  close(): Promise<void>;
}
