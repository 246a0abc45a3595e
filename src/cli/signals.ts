/**
 * Resolves on the first SIGTERM or SIGINT. A second signal while the caller drains ends the
 * process at once with exit code 1: unacknowledged deliveries go back to their queues.
 */
export function untilSignal(onSecond: () => void = () => process.exit(1)): { promise: Promise<string>; dispose(): void } {
  let received = false;
  let resolve!: (signal: string) => void;
  const promise = new Promise<string>((r) => (resolve = r));
  const handler = (signal: string): void => {
    if (received) return onSecond();
    received = true;
    resolve(signal);
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  return {
    promise,
    dispose: () => {
      process.off('SIGTERM', handler);
      process.off('SIGINT', handler);
    },
  };
}
