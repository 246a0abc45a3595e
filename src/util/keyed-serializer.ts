/**
 * Runs tasks of one key one after the other, and of different keys at once. Nothing is kept for a
 * key once its last task has ended.
 */
export class KeyedSerializer {
  private readonly tails = new Map<string, Promise<unknown>>();

  serialize<T>(key: string, task: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const run = before.then(task, task);
    const tail = run.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return run;
  }
}
