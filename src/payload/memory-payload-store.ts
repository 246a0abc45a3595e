import type { PayloadKey, PayloadStore } from './payload-store.js';

/**
 * A payload store in this process's memory: for unit tests and the in-memory stage harness, where
 * nothing else shares it. Not for production: stages of other processes cannot read it.
 */
export class MemoryPayloadStore implements PayloadStore {
  private readonly entries = new Map<string, { data: Buffer; committed: boolean; at: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  put(key: PayloadKey, data: Buffer): Promise<void> {
    this.entries.set(name(key), { data: Buffer.from(data), committed: false, at: this.now() });
    return Promise.resolve();
  }

  commit(key: PayloadKey): Promise<void> {
    const entry = this.entries.get(name(key));
    if (entry !== undefined) entry.committed = true;
    return Promise.resolve();
  }

  get(key: PayloadKey): Promise<Buffer | undefined> {
    return Promise.resolve(this.entries.get(name(key))?.data);
  }

  has(key: PayloadKey): Promise<boolean> {
    return Promise.resolve(this.entries.has(name(key)));
  }

  delete(key: PayloadKey): Promise<void> {
    this.entries.delete(name(key));
    return Promise.resolve();
  }

  sweep(pendingBefore: Date, anyBefore: Date): Promise<number> {
    let deleted = 0;
    for (const [key, entry] of this.entries) {
      if ((!entry.committed && entry.at < pendingBefore.getTime()) || entry.at < anyBefore.getTime()) {
        this.entries.delete(key);
        deleted++;
      }
    }
    return Promise.resolve(deleted);
  }

  count(tenant?: string): Promise<number> {
    if (tenant === undefined) return Promise.resolve(this.entries.size);
    return Promise.resolve([...this.entries.keys()].filter((key) => key.startsWith(`${tenant}/`)).length);
  }

  /** Whether the payload is committed (tests). */
  committed(key: PayloadKey): boolean | undefined {
    return this.entries.get(name(key))?.committed;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function name(key: PayloadKey): string {
  return `${key.tenant}/${key.id}`;
}
