/** What a {@link PassHeap} orders: by `pass`, lowest first; it keeps the entry's place in it. */
export interface PassEntry {
  pass: number;
  /** In the heap (at `heapAt`). */
  queued: boolean;
  heapAt: number;
}

/**
 * A binary min-heap on `pass` whose entries know their place, so that any of them can be taken
 * out, or put back in order after its `pass` changed, in O(log n): the fair share's line of seats
 * asking for a slot, served lowest virtual time first.
 */
export class PassHeap<T extends PassEntry> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  push(entry: T): void {
    entry.queued = true;
    this.items.push(entry);
    this.siftUp(entry, this.items.length - 1);
  }

  /** Takes out the entry of the lowest `pass`; the heap must not be empty. */
  pop(): T {
    const top = this.items[0];
    this.remove(top);
    return top;
  }

  /** Takes `entry` out, wherever it is (nothing when it is not in). */
  remove(entry: T): void {
    if (!entry.queued) return;
    const items = this.items;
    const at = entry.heapAt;
    const last = items.pop() as T;
    entry.queued = false;
    entry.heapAt = -1;
    if (last === entry) return;
    items[at] = last;
    last.heapAt = at;
    this.reposition(last);
  }

  /** Restores the order around `entry` after its `pass` changed. */
  reposition(entry: T): void {
    if (!entry.queued) return;
    this.siftUp(entry, entry.heapAt);
    this.siftDown(entry, entry.heapAt);
  }

  private siftUp(entry: T, from: number): void {
    const items = this.items;
    let at = from;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (items[parent].pass <= entry.pass) break;
      items[at] = items[parent];
      items[at].heapAt = at;
      at = parent;
    }
    items[at] = entry;
    entry.heapAt = at;
  }

  private siftDown(entry: T, from: number): void {
    const items = this.items;
    let at = from;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && items[right].pass < items[left].pass ? right : left;
      if (items[child].pass >= entry.pass) break;
      items[at] = items[child];
      items[at].heapAt = at;
      at = child;
    }
    items[at] = entry;
    entry.heapAt = at;
  }
}
