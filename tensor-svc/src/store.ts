/**
 * The tensor store: an index of objects over their files, composed of the placement policy
 * (`placement.ts`), the node's directories (`store-directories.ts`), the writing and reading
 * of bytes (`put-writer.ts`, `object-reader.ts`) and one-at-a-time file operations per id
 * (`id-locks.ts`).
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, unlinkSync, writeFileSync } from 'node:fs';
import { copyFile, open, utimes, type FileHandle } from 'node:fs/promises';
import { crc32c } from '@node-rs/crc32';
import { Code, DiffmeshError, invalidParameter, type Logger, type ObjectRef } from '@diffmesh/core';
import { formatChecksum, isIncomingFileName } from '@diffmesh/tensor-client';
import { isErrno, unlinkQuiet } from './fs-util.js';
import { IdLocks } from './id-locks.js';
import { checkObjectId, type ObjectHeader } from './object-header.js';
import { ObjectReader } from './object-reader.js';
import { TierPlacement, type Tier, type TierUsage } from './placement.js';
import type { ObjectStore, StoredObjectInfo, StoreUsage } from './object-store.js';
import { PutWriter, checksumOfIncomingFile, publishFile, type PutTarget } from './put-writer.js';
import { removeSidecar, writeSidecar } from './sidecar.js';
import { FILE_MODE, StoreDirectories } from './store-directories.js';
import { recoverObjects } from './store-recovery.js';

export type { StoredObjectInfo, StoreUsage } from './object-store.js';

/** Options of {@link TieredStore.open}. */
export interface TieredStoreOptions {
  /** Directory in shared memory (tmpfs) holding memory-tier objects and links to spilled ones. */
  shmDir: string;
  /** Directory on disk holding spilled objects. */
  spillDir: string;
  memoryCapacityBytes: number;
  /** Memory use past which new objects go to disk while the disk has room. */
  spillThresholdBytes: number;
  /** 0 = no disk tier. */
  diskCapacityBytes: number;
  defaultTtlMs: number;
  /** 0 = no background sweep. */
  sweepIntervalMs: number;
  /** Retry-After suggested with STORE_FULL. */
  retryAfterMs: number;
  log: Logger;
  /** Clock, for tests. Default `Date.now`. */
  now?: () => number;
  /**
   * Find the objects a tensor-svc that is gone (killed, crashed) left in the directories again,
   * from the sidecars beside them; objects whose TTL ran out are deleted. Default false: its
   * leftovers are deleted.
   */
  recover?: boolean;
}

interface Entry {
  ref: ObjectRef;
  tier: Tier;
  /**
   * The data file: `shmDir/<objectFileName(id)>` in memory; in the spill directory a name of
   * its own per version (a replacement never writes over a version still indexed or read).
   */
  file: string;
  /** Identity of the data file, so a reader can tell it opened this version's file. */
  dev: number;
  ino: number;
  expiresAt: number;
  /** Open readers; a dead entry's bytes are released when the last one closes. */
  readers: number;
  dead: boolean;
}

/** How many expired ids are remembered so that late readers hear "expired", not "not found". */
const EXPIRED_MEMORY = 10_000;
/** How many times {@link TieredStore.openRead} tries again when the object is replaced while it opens the file. */
const OPEN_ATTEMPTS = 5;

function objectNotFound(id: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', `object ${id} not found`, { metadata: { object_id: id } });
}

function objectExpired(id: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_EXPIRED', `object ${id} expired (its TTL passed)`, { metadata: { object_id: id } });
}

/**
 * The node-local object store behind tensor-svc. Objects are files: in shared memory
 * (`shmDir`, a tmpfs) while memory use is under the spill threshold, in `spillDir` on disk
 * beyond it (with a symbolic link in `shmDir`), so a reader on the same node opens
 * `shmDir/<objectFileName(id)>` whatever the tier. A file appears only once its bytes are
 * complete and verified (written under a hidden temporary name, then renamed), and its
 * mtime is the object's expiry, so same-node readers can tell an expired object without
 * asking. Bytes never sit in the service's heap: puts write chunks to the file as they
 * arrive, gets read chunks from it.
 *
 * Capacity: each put reserves its size up front (see {@link TierPlacement}); otherwise
 * RESOURCE_EXHAUSTED / STORE_FULL with a message naming both tiers' use. Expired objects are
 * dropped before a put is refused, on access, and by a periodic sweep.
 */
export class TieredStore implements PutTarget, ObjectStore {
  private readonly objects = new Map<string, Entry>();
  private readonly expired = new Map<string, number>();
  private readonly idLocks = new IdLocks();
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;
  private closed = false;

  private constructor(
    private readonly opts: TieredStoreOptions,
    private readonly placement: TierPlacement,
    private readonly dirs: StoreDirectories,
  ) {
    this.now = opts.now ?? Date.now;
    if (opts.sweepIntervalMs > 0) {
      this.timer = setInterval(() => {
        this.sweep().catch((err: unknown) => opts.log.warn({ err }, 'tensor store: sweep failed'));
      }, opts.sweepIntervalMs);
      this.timer.unref();
    }
  }

  /**
   * Creates (or takes over) the store's directories (see {@link StoreDirectories.claim}).
   * Throws when another live tensor-svc owns one, or when it holds foreign files.
   */
  static async open(opts: TieredStoreOptions): Promise<TieredStore> {
    const placement = new TierPlacement(opts);
    const keep = opts.recover ?? false;
    const dirs = await StoreDirectories.claim({ shmDir: opts.shmDir, spillDir: opts.spillDir, spill: opts.diskCapacityBytes > 0, keep });
    const store = new TieredStore(opts, placement, dirs);
    if (keep) {
      try {
        await store.recover();
      } catch (err) {
        await store.close();
        throw err;
      }
    }
    return store;
  }

  /** Indexes the objects a previous run left (see {@link TieredStoreOptions.recover}). */
  private async recover(): Promise<void> {
    const found = await recoverObjects(this.dirs.shmDir, this.dirs.spillDir, Date.now(), this.opts.log);
    for (const o of found.objects) {
      this.objects.set(o.ref.objectId, { ...o, ref: copyRef(o.ref), readers: 0, dead: false });
      this.placement.restore(o.tier, o.ref.sizeBytes);
    }
  }

  /** The shared-memory directory. */
  get shmDir(): string {
    return this.dirs.shmDir;
  }

  /**
   * Starts a put: checks the header, assigns the id when it is empty, picks the tier and
   * reserves the bytes there (or throws STORE_FULL), and creates the temporary file.
   */
  async beginPut(header: ObjectHeader): Promise<PutWriter> {
    const { full, tier } = await this.admit(header);
    return this.openWriter(full, tier);
  }

  /**
   * Stores an object whose bytes are all at hand (PutObjects): checks and reserves as
   * {@link beginPut} does, verifies the checksum and publishes the object. Into shared memory
   * the file is written with synchronous calls: on tmpfs they copy memory for microseconds,
   * while the asynchronous path makes five round trips through libuv's thread pool (open,
   * write, close, utimes, rename), which cost more than the copy, most of all after an idle
   * spell. Objects bound for the disk tier take the asynchronous path.
   */
  async putWhole(header: ObjectHeader, data: Uint8Array): Promise<ObjectRef> {
    if (data.byteLength !== header.sizeBytes) {
      throw invalidParameter('data', `${data.byteLength} bytes; header.size_bytes announced ${header.sizeBytes}`);
    }
    const { full, tier } = await this.admit(header);
    if (tier === 'disk') {
      const writer = await this.openWriter(full, tier);
      try {
        if (data.byteLength > 0) await writer.write(0, data);
        return await writer.commit();
      } catch (err) {
        await writer.abort();
        throw err;
      }
    }
    const temp = this.dirs.tempPath(tier);
    try {
      writeFileSync(temp, data, { flag: 'wx', mode: FILE_MODE });
      return await this.commit(full, tier, temp, crc32c(data), 'sync');
    } catch (err) {
      try {
        unlinkSync(temp);
      } catch {
        // already renamed, or never created
      }
      this.unreserve(tier, header.sizeBytes);
      throw err instanceof DiffmeshError ? err : this.fsError(err, tier, header);
    }
  }

  /**
   * Takes over a file that a client on this node wrote in `<shmDir>/.incoming` (PutObjects
   * with `shm_file`) as the object `header` describes: checks that `fileName` is a regular
   * file there (never a link) of `header.sizeBytes` bytes matching `header.checksum`, reserves
   * its bytes like any put, and publishes it: renamed into place in shared memory, or copied to
   * the spill directory when memory is past its threshold. The bytes never cross a socket.
   * The file is gone afterwards, whatever the outcome.
   */
  async adopt(header: ObjectHeader, fileName: string): Promise<ObjectRef> {
    if (!isIncomingFileName(fileName)) {
      throw invalidParameter(
        'shm_file',
        `must be a file name of 1 to 128 characters [A-Za-z0-9_-], got ${JSON.stringify(fileName.slice(0, 80))}`,
      );
    }
    this.checkOpen();
    const file = this.dirs.incomingFile(fileName);
    let copy: string | undefined;
    let reserved: Tier | undefined;
    try {
      if (header.checksum === '') throw invalidParameter('header.checksum', 'is required with shm_file');
      const crc = await checksumOfIncomingFile(file, fileName, this.dirs.incomingDir, header);
      const { full, tier } = await this.admit(header);
      reserved = tier;
      if (tier === 'memory') return await this.commit(full, tier, file, crc, 'sync');
      copy = this.dirs.tempPath(tier);
      await copyFile(file, copy, fsConstants.COPYFILE_EXCL).catch((err: unknown) => {
        throw this.fsError(err, tier, header);
      });
      return await this.commit(full, tier, copy, crc);
    } catch (err) {
      if (copy) await unlinkQuiet(copy).catch(() => undefined);
      if (reserved) this.unreserve(reserved, header.sizeBytes);
      throw err;
    } finally {
      try {
        unlinkSync(file);
      } catch {
        // renamed into place, or never there
      }
    }
  }

  /** Checks a put's header, assigns the id when it is empty, and reserves its bytes in a tier (or throws STORE_FULL). */
  private async admit(header: ObjectHeader): Promise<{ full: ObjectHeader; tier: Tier }> {
    this.checkOpen();
    const objectId = header.objectId || `anon:${header.name}:${randomBytes(6).toString('hex')}`;
    checkObjectId(objectId, 'header.object_id');
    const tier = await this.reserve(header);
    return { full: { ...header, objectId }, tier };
  }

  /** Picks the tier for a new object and reserves its bytes there; sweeps expired objects before it gives up with STORE_FULL. */
  private async reserve(h: ObjectHeader): Promise<Tier> {
    let tier = this.placement.reserve(h.sizeBytes);
    if (!tier) {
      await this.sweep();
      tier = this.placement.reserve(h.sizeBytes);
    }
    if (!tier) throw this.placement.storeFull(h);
    return tier;
  }

  /** Creates the temporary file of an admitted put; gives the reservation back when it cannot. */
  private async openWriter(header: ObjectHeader, tier: Tier): Promise<PutWriter> {
    const temp = this.dirs.tempPath(tier);
    let fh: FileHandle;
    try {
      fh = await open(temp, 'wx', FILE_MODE);
    } catch (err) {
      this.unreserve(tier, header.sizeBytes);
      throw this.fsError(err, tier, header);
    }
    return new PutWriter(this, header, tier, temp, fh);
  }

  /**
   * Opens an object for reading. `checksum` (from a caller's ref), when given, must match.
   * The reader's ref always describes the bytes it reads: when the object is replaced while
   * its file is being opened (a put of the same id renames the new file into place), the file
   * opened is checked against the entry and the open is tried again with the new version.
   */
  async openRead(objectId: string, checksum = ''): Promise<ObjectReader> {
    for (let attempt = 1; ; attempt++) {
      const entry = this.live(objectId);
      if (checksum !== '' && checksum !== entry.ref.checksum) {
        throw new DiffmeshError(
          Code.DATA_LOSS,
          'CHECKSUM_MISMATCH',
          `object ${objectId}: the ref's checksum ${checksum} does not match the stored ${entry.ref.checksum}`,
          { metadata: { object_id: objectId } },
        );
      }
      entry.readers += 1;
      let fh: FileHandle | undefined;
      let failure: Error | undefined;
      try {
        fh = await open(entry.file, 'r');
        const st = await fh.stat();
        if (st.ino === entry.ino && st.dev === entry.dev) return new ObjectReader(copyRef(entry.ref), fh, () => this.closeReader(entry));
      } catch (err) {
        // ENOENT: deleted meanwhile, or replaced by a put of the same id.
        if (!isErrno(err, 'ENOENT')) failure = err as Error;
      }
      this.closeReader(entry);
      await fh?.close().catch(() => undefined);
      if (failure !== undefined) throw failure;
      const replacing = this.idLocks.pending(objectId);
      if (this.objects.get(objectId) === entry && !replacing) throw objectNotFound(objectId); // its file is gone
      if (attempt >= OPEN_ATTEMPTS) {
        throw new DiffmeshError(
          Code.ABORTED,
          'INTERNAL',
          `object ${objectId} was replaced ${attempt} times while being opened; try again`,
          {
            metadata: { object_id: objectId },
          },
        );
      }
      await replacing; // the replacement in progress
    }
  }

  /** An object's metadata; NOT_FOUND when unknown or expired. */
  stat(objectId: string): StoredObjectInfo {
    const entry = this.live(objectId);
    return { ref: copyRef(entry.ref), tier: entry.tier, expiresAt: entry.expiresAt };
  }

  /** Deletes an object; false when it did not exist. */
  async delete(objectId: string): Promise<boolean> {
    this.checkOpen();
    const entry = this.objects.get(objectId);
    if (!entry) return false;
    await this.drop(entry);
    return true;
  }

  /** Restarts an object's TTL from now, with `ttlMs` when non-zero. */
  async touch(objectId: string, ttlMs = 0): Promise<StoredObjectInfo> {
    const entry = this.live(objectId);
    const newTtl = ttlMs > 0 && ttlMs !== entry.ref.ttlMs;
    if (ttlMs > 0) entry.ref.ttlMs = ttlMs;
    entry.expiresAt = this.now() + entry.ref.ttlMs;
    // Under the id's lock, and only while the entry is indexed: the path may hold a newer version's file by then.
    await this.idLocks.run(objectId, async () => {
      if (this.objects.get(objectId) !== entry) return;
      await this.stampExpiry(entry);
      if (newTtl) await writeSidecar(entry.file, entry.ref, FILE_MODE);
    });
    return { ref: copyRef(entry.ref), tier: entry.tier, expiresAt: entry.expiresAt };
  }

  /** Deletes every expired object now; returns how many. */
  sweep(): Promise<number> {
    if (this.sweeping) return this.sweeping;
    // `.finally` always runs later, so the field is set before it is cleared.
    const run = this.sweepNow().finally(() => {
      if (this.sweeping === run) this.sweeping = undefined;
    });
    this.sweeping = run;
    return run;
  }

  private async sweepNow(): Promise<number> {
    if (this.closed) return 0;
    await this.dirs.sweepAbandoned(this.opts.log);
    const now = this.now();
    let n = 0;
    let bytes = 0;
    for (const entry of [...this.objects.values()]) {
      if (now >= entry.expiresAt) {
        bytes += entry.ref.sizeBytes;
        await this.expire(entry);
        n += 1;
      }
    }
    if (n > 0) this.opts.log.debug({ objects: n, bytes }, 'tensor store: deleted expired objects');
    return n;
  }

  usage(): StoreUsage {
    const count = (tier: Tier): number => [...this.objects.values()].filter((e) => e.tier === tier).length;
    const of = (tier: Tier): TierUsage => ({ objects: count(tier), ...this.placement.usage(tier) });
    return { memory: { ...of('memory'), spillThresholdBytes: this.opts.spillThresholdBytes }, disk: of('disk') };
  }

  /** Stops the sweep and deletes every object and the directories. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.sweeping?.catch(() => 0);
    this.objects.clear();
    this.expired.clear();
    await this.dirs.release(this.opts.log);
  }

  // ---- used by PutWriter ----

  /**
   * Publishes a completed file under its object id and records it. `files: 'sync'` stamps and
   * renames a shared-memory file with synchronous calls (see {@link putWhole}).
   */
  async commit(h: ObjectHeader, tier: Tier, temp: string, crc: number, files: 'async' | 'sync' = 'async'): Promise<ObjectRef> {
    const id = h.objectId;
    const checksum = formatChecksum(crc);
    if (h.checksum !== '' && h.checksum !== checksum) {
      throw new DiffmeshError(
        Code.INVALID_ARGUMENT,
        'CHECKSUM_MISMATCH',
        `header.checksum: the bytes received do not match ${h.checksum} (got ${checksum})`,
        { metadata: { field: 'header.checksum', object_id: id } },
      );
    }
    const now = this.now();
    const ttlMs = h.ttlMs || this.opts.defaultTtlMs;
    const entry: Entry = {
      ref: {
        objectId: id,
        ownerAddress: '',
        ownerNodeId: '',
        shape: [...h.shape],
        dtype: h.dtype,
        sizeBytes: h.sizeBytes,
        createdAt: now,
        name: h.name,
        ttlMs,
        checksum,
        ...(h.durableUri ? { durableUri: h.durableUri } : {}),
      },
      tier,
      file: tier === 'memory' ? this.dirs.shmPath(id) : this.dirs.spillPath(id),
      dev: 0,
      ino: 0,
      expiresAt: now + ttlMs,
      readers: 0,
      dead: false,
    };
    // Commits of one id run one at a time, and after the file removals of a dropped version,
    // so the files and the index agree.
    return this.idLocks.run(id, async () => {
      this.checkOpen();
      const link = tier === 'disk' ? { path: this.dirs.shmPath(id), temp: this.dirs.linkTempPath() } : undefined;
      // The sidecar first: a restarted service finds the object by it once the bytes are in place.
      await writeSidecar(entry.file, entry.ref, FILE_MODE, files === 'sync' && tier === 'memory' ? 'sync' : 'async');
      try {
        ({ dev: entry.dev, ino: entry.ino } = await publishFile(
          temp,
          { tier, file: entry.file, link, createdAt: now, expiresAt: entry.expiresAt },
          files,
        ));
      } catch (err) {
        // Unless it still describes the version in place (a memory-tier replacement that failed).
        if (this.objects.get(id)?.file !== entry.file) await removeSidecar(entry.file).catch(() => undefined);
        throw err;
      }
      const old = this.objects.get(id);
      this.objects.set(id, entry);
      this.expired.delete(id);
      this.placement.settle(entry.tier, h.sizeBytes);
      if (old) {
        old.dead = true;
        this.releaseIfUnread(old);
        // The new files replaced the old ones by rename; only an old file elsewhere remains.
        if (old.file !== entry.file && old.file !== this.dirs.shmPath(id)) {
          await unlinkQuiet(old.file).catch((err: unknown) =>
            this.opts.log.warn({ err, file: old.file }, 'tensor store: could not delete a replaced file'),
          );
        }
        if (old.file !== entry.file) await removeSidecar(old.file).catch(() => undefined);
      }
      return copyRef(entry.ref);
    });
  }

  /** Gives back a put's reservation (after an abort). */
  unreserve(tier: Tier, bytes: number): void {
    this.placement.unreserve(tier, bytes);
  }

  /** The error to report for a failed file operation on `tier`. */
  fsError(err: unknown, tier: Tier, header: Pick<ObjectHeader, 'name' | 'sizeBytes'>): Error {
    return this.placement.fsError(err, tier, header);
  }

  // ---- internals ----

  /** The entry of a live object; throws NOT_FOUND (OBJECT_EXPIRED past its TTL). */
  private live(id: string): Entry {
    this.checkOpen();
    const entry = this.objects.get(id);
    if (!entry) {
      if (this.expired.has(id)) throw objectExpired(id);
      throw objectNotFound(id);
    }
    if (this.now() >= entry.expiresAt) {
      void this.expire(entry).catch((err: unknown) =>
        this.opts.log.warn({ err, objectId: id }, 'tensor store: could not delete expired object'),
      );
      throw objectExpired(id);
    }
    return entry;
  }

  private async expire(entry: Entry): Promise<void> {
    this.expired.set(entry.ref.objectId, this.now());
    if (this.expired.size > EXPIRED_MEMORY) {
      const oldest = this.expired.keys().next();
      if (!oldest.done) this.expired.delete(oldest.value);
    }
    await this.drop(entry);
  }

  /**
   * Removes an object from the index at once, and its files once earlier commits of its id are
   * done (open readers keep reading). A put of the same id that commits meanwhile owns the
   * shared-memory path by then: the removal leaves it alone.
   */
  private async drop(entry: Entry): Promise<void> {
    const id = entry.ref.objectId;
    if (this.objects.get(id) !== entry) return;
    this.objects.delete(id);
    entry.dead = true;
    this.releaseIfUnread(entry);
    await this.idLocks.run(id, async () => {
      if (!this.objects.has(id)) {
        await unlinkQuiet(this.dirs.shmPath(id));
        await removeSidecar(this.dirs.shmPath(id));
      }
      if (entry.tier === 'disk' && this.objects.get(id)?.file !== entry.file) {
        await unlinkQuiet(entry.file);
        await removeSidecar(entry.file);
      }
    });
  }

  private closeReader(entry: Entry): void {
    entry.readers -= 1;
    this.releaseIfUnread(entry);
  }

  /** A dead entry's bytes stay counted while readers hold its file open. */
  private releaseIfUnread(entry: Entry): void {
    if (entry.dead && entry.readers === 0) {
      this.placement.release(entry.tier, entry.ref.sizeBytes);
      entry.readers = -1; // released; never again
    }
  }

  private async stampExpiry(entry: Entry): Promise<void> {
    await utimes(entry.file, new Date(this.now()), new Date(entry.expiresAt)).catch((err: unknown) => {
      if (!isErrno(err, 'ENOENT')) throw err;
    });
  }

  private checkOpen(): void {
    if (this.closed) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'tensor store is closed');
  }
}

function copyRef(ref: ObjectRef): ObjectRef {
  return { ...ref, shape: [...ref.shape] };
}
