import { randomFillSync } from 'node:crypto';

/**
 * UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, version 7, a 12-bit counter that keeps ids of
 * the same millisecond in creation order (method 1, "fixed-length dedicated counter"), the
 * variant, and 62 random bits. Random bytes come from a pool refilled 4 KiB at a time: the
 * `uuid` package asks the kernel for 16 bytes per id, which costs more than the rest of a job's
 * envelope.
 */
const pool = Buffer.alloc(4096);
let offset = pool.length;
const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** A generator with its own clock state (tests make their own; jobs share `uuidv7`). */
export function createUuidV7(): (now?: number) => string {
  let lastMs = -1;
  let counter = 0;
  return (now = Date.now()) => {
    let ms = now;
    if (ms > lastMs) {
      lastMs = ms;
      counter = random12();
    } else {
      // Same millisecond (or the clock stepped back): count up; on overflow borrow the next ms.
      ms = lastMs;
      counter++;
      if (counter > 0xfff) {
        lastMs = ms = lastMs + 1;
        counter = 0;
      }
    }
    if (offset + 8 > pool.length) {
      randomFillSync(pool);
      offset = 0;
    }
    const r = offset;
    offset += 8;
    const high = Math.floor(ms / 0x10000);
    const low = ms % 0x10000;
    return (
      HEX[(high >>> 24) & 0xff] +
      HEX[(high >>> 16) & 0xff] +
      HEX[(high >>> 8) & 0xff] +
      HEX[high & 0xff] +
      '-' +
      HEX[low >>> 8] +
      HEX[low & 0xff] +
      '-' +
      HEX[0x70 | (counter >>> 8)] +
      HEX[counter & 0xff] +
      '-' +
      HEX[0x80 | (pool[r] & 0x3f)] +
      HEX[pool[r + 1]] +
      '-' +
      HEX[pool[r + 2]] +
      HEX[pool[r + 3]] +
      HEX[pool[r + 4]] +
      HEX[pool[r + 5]] +
      HEX[pool[r + 6]] +
      HEX[pool[r + 7]]
    );
  };
}

export const uuidv7 = createUuidV7();

/** A counter start below 2^11, so that a millisecond has room for at least 2,048 ids. */
function random12(): number {
  if (offset + 2 > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const value = ((pool[offset] << 8) | pool[offset + 1]) & 0x7ff;
  offset += 2;
  return value;
}

/** The Unix milliseconds a UUIDv7 was made at, or undefined when `id` is not a UUIDv7. */
export function uuidv7Time(id: string): number | undefined {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(id)) return undefined;
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}
