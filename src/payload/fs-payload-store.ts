import { randomBytes } from 'node:crypto';
import { link, lstat, mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { InvalidPayloadError } from '../errors/errors.js';
import { checkPayloadKey, checkPayloadTenant, isPayloadTenant } from './payload-key.js';
import type { PayloadKey, PayloadStore } from './payload-store.js';

export interface FsPayloadStoreOptions {
  /**
   * Flush each payload and each directory change to the disk before `put` and `commit` return,
   * so that a machine crash never loses a payload whose job the broker already holds.
   * @defaultValue true
   */
  fsync?: boolean;
}

/** `<id>` (committed) or `<id>.pending`: a payload file. */
const PAYLOAD_FILE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(\.pending)?$/;
/** `.<id>.<random>.tmp`: a payload being written (left behind by a crash mid-write). */
const TEMP_FILE = /^\.[0-9a-f-]{36}\.[0-9a-f]+\.tmp$/;
const PENDING = '.pending';

/**
 * The embedded payload store: one directory, shared by every stage that reads or writes
 * offloaded payloads (a volume in compose and Kubernetes). Safe for several processes, on one
 * machine or on a shared filesystem (NFS and the like), working on the same directory at once.
 *
 * Layout (docs/payloads.md "Stores"; other languages read and write the same files):
 *
 * ```
 * <dir>/<tenant>/<id>                    a committed payload: the bytes of the job's `args`
 * <dir>/<tenant>/<id>.pending            stored, its job not yet confirmed by the broker
 * <dir>/<tenant>/.<id>.<random>.tmp      being written; never read, swept like a pending one
 * ```
 *
 * `<tenant>` is a tenant slug or `_` (no tenant), `<id>` a lower-case UUID. A payload is written
 * to a temporary file, flushed, then linked (or renamed) to `<id>.pending`: a reader never sees a
 * partial file. `commit` renames `<id>.pending` to `<id>`, atomically. A file's mtime is when it
 * was stored (a rename keeps it): `sweep` goes by it. `get` reads either name, since a consumer
 * may see the job before its publisher has committed the payload.
 */
export class FsPayloadStore implements PayloadStore {
  readonly dir: string;
  private readonly fsync: boolean;

  constructor(dir: string, options: FsPayloadStoreOptions = {}) {
    this.dir = path.resolve(dir);
    this.fsync = options.fsync ?? true;
  }

  async put(ref: PayloadKey, data: Buffer): Promise<void> {
    const { tenant, id } = checkPayloadKey(ref);
    const folder = path.join(this.dir, tenant);
    // A new tenant folder is flushed into the store's directory too, or a crash could lose it.
    if ((await mkdir(folder, { recursive: true })) !== undefined && this.fsync) await syncDir(this.dir);
    const committed = path.join(folder, id);
    if (await exists(committed)) throw storedAlready(tenant, id);
    const temp = path.join(folder, `.${id}.${randomBytes(6).toString('hex')}.tmp`);
    const handle = await open(temp, 'wx');
    try {
      await handle.writeFile(data);
      if (this.fsync) await handle.sync();
    } catch (err) {
      await handle.close();
      await unlinkIfThere(temp);
      throw err;
    }
    await handle.close();
    let named: boolean;
    try {
      named = await nameFile(temp, committed + PENDING);
    } finally {
      await unlinkIfThere(temp);
    }
    if (!named) throw storedAlready(tenant, id);
    if (this.fsync) await syncDir(folder);
  }

  async commit(ref: PayloadKey): Promise<void> {
    const file = this.fileOf(ref);
    try {
      await rename(file + PENDING, file);
    } catch (err) {
      // Gone (deleted, swept) or committed already: nothing to do.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    // A commit lost in a crash would leave the payload pending, and the sweep would take it.
    if (this.fsync) await syncDir(path.dirname(file));
  }

  async get(ref: PayloadKey): Promise<Buffer | undefined> {
    const file = this.fileOf(ref);
    // Committed, else pending, else committed again: a commit may rename it between the first two reads.
    return (await readIfThere(file)) ?? (await readIfThere(file + PENDING)) ?? (await readIfThere(file));
  }

  async has(ref: PayloadKey): Promise<boolean> {
    const file = this.fileOf(ref);
    // In get's order, for the same reason: a commit may rename it between the first two looks.
    return (await exists(file)) || (await exists(file + PENDING)) || (await exists(file));
  }

  async delete(ref: PayloadKey): Promise<void> {
    const file = this.fileOf(ref);
    // Pending first: a commit racing with this delete either finds no pending file, or has renamed
    // it before, and then the committed file is unlinked next. Either way nothing is left.
    await unlinkIfThere(file + PENDING);
    await unlinkIfThere(file);
  }

  async sweep(pendingBefore: Date, anyBefore: Date): Promise<number> {
    let deleted = 0;
    for (const tenant of await this.tenants()) {
      const folder = path.join(this.dir, tenant);
      for (const name of await listIfThere(folder)) {
        const payload = PAYLOAD_FILE.exec(name);
        const pending = payload ? payload[2] !== undefined : TEMP_FILE.test(name);
        if (!payload && !pending) continue; // not ours
        const file = path.join(folder, name);
        const stats = await lstat(file).catch(ignoreMissing);
        if (!stats?.isFile()) continue;
        const old = stats.mtime < anyBefore || (pending && stats.mtime < pendingBefore);
        // Another process sweeping the same directory may have taken it: only ours are counted.
        if (old && (await unlinkIfThere(file)) && payload) deleted++;
      }
    }
    return deleted;
  }

  async count(tenant?: string): Promise<number> {
    const tenants = tenant === undefined ? await this.tenants() : [checkPayloadTenant(tenant)];
    let count = 0;
    for (const each of tenants) {
      for (const name of await listIfThere(path.join(this.dir, each))) if (PAYLOAD_FILE.test(name)) count++;
    }
    return count;
  }

  async close(): Promise<void> {
    // Nothing held open between calls.
  }

  /** The committed file of a checked key: `<dir>/<tenant>/<id>`. */
  private fileOf(ref: PayloadKey): string {
    const { tenant, id } = checkPayloadKey(ref);
    return path.join(this.dir, tenant, id);
  }

  /** The tenant folders in the store (other entries are not ours). */
  private async tenants(): Promise<string[]> {
    return (await listIfThere(this.dir)).filter(isPayloadTenant);
  }
}

function storedAlready(tenant: string, id: string): InvalidPayloadError {
  return new InvalidPayloadError(`payload ${tenant}/${id} is stored already (a payload is never overwritten)`);
}

/**
 * Gives the written temporary file its name without ever replacing a file: a hard link fails
 * when the name exists (the caller removes `temp`). Filesystems without hard links (some network
 * shares) get a rename after a check.
 * @returns false when `target` exists already.
 */
async function nameFile(temp: string, target: string): Promise<boolean> {
  try {
    await link(temp, target);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
  }
  if (await exists(target)) return false;
  await rename(temp, target);
  return true;
}

/** Flushes a directory's entries (new and renamed names). Best effort: not every platform can. */
async function syncDir(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch {
    // EISDIR, EPERM, EINVAL on platforms that cannot sync a directory: the file itself was synced.
  } finally {
    await handle?.close();
  }
}

async function exists(file: string): Promise<boolean> {
  return (await lstat(file).catch(ignoreMissing)) !== undefined;
}

async function readIfThere(file: string): Promise<Buffer | undefined> {
  return readFile(file).catch(ignoreMissing);
}

/** @returns whether this call removed it. */
async function unlinkIfThere(file: string): Promise<boolean> {
  try {
    await unlink(file);
    return true;
  } catch (err) {
    ignoreMissing(err);
    return false;
  }
}

async function listIfThere(dir: string): Promise<string[]> {
  return (await readdir(dir).catch(ignoreMissing)) ?? [];
}

/** A catch handler: undefined for a missing file (or a folder that is not one), the error otherwise. */
function ignoreMissing(err: unknown): undefined {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
  throw err;
}
