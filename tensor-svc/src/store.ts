import { randomBytes } from 'node:crypto';
import { closeSync, constants as fsConstants, fstatSync, openSync, read, readSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { copyFile, lstat, mkdir, open, readFile, readdir, rename, rm, rmdir, stat, symlink, unlink, utimes, writeFile, type FileHandle } from 'node:fs/promises';
import { promisify } from 'node:util';
import path from 'node:path';
import { crc32c } from '@node-rs/crc32';
import {
  Code,
  DiffmeshError,
  formatBytes,
  INCOMING_DIR,
  formatChecksum,
  incomingPath,
  invalidParameter,
  isIncomingFileName,
  objectFileName,
  type Dtype,
  type Logger,
  type ObjectRef,
} from '@diffmesh/runtime';

/** Where an object's bytes live: shared memory (tmpfs) or the spill directory on disk. */
export type Tier = 'memory' | 'disk';

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
}

/** A validated Put header. */
export interface ObjectHeader {
  /** '' = assigned by the store. */
  objectId: string;
  name: string;
  shape: number[];
  dtype: Dtype;
  sizeBytes: number;
  /** 0 = the store's default. */
  ttlMs: number;
  /** `crc32c:<hex>` the bytes must match; '' = not checked. */
  checksum: string;
}

/** A stored object's metadata (the ref's owner fields are filled by the service). */
export interface StoredObjectInfo {
  ref: ObjectRef;
  tier: Tier;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

/** Objects, bytes and limits of one tier. */
export interface TierUsage {
  objects: number;
  /** Bytes of stored objects (and of deleted ones still being read). */
  bytes: number;
  /** Bytes reserved by puts in progress. */
  reservedBytes: number;
  capacityBytes: number;
  dir: string;
}

export interface StoreUsage {
  memory: TierUsage & { spillThresholdBytes: number };
  disk: TierUsage;
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

interface TierState {
  readonly dir: string;
  readonly capacity: number;
  used: number;
  reserved: number;
}

/**
 * Name of the file marking a directory as a tensor-svc's own; it holds the owner's pid and,
 * where /proc exists, the process's start time (`<pid> <start>`), which tells the owner
 * from an unrelated process that got its pid later.
 */
export const DIR_MARKER = '.tensor-svc';
/** How many expired ids are remembered so that late readers hear "expired", not "not found". */
const EXPIRED_MEMORY = 10_000;
/** Object ids are free-form strings up to this length, without control characters. */
const MAX_ID_LENGTH = 1024;
const FILE_MODE = 0o640;
const DIR_MODE = 0o750;
/** A file in `.incoming` untouched this long was left by a client that went away before sending its put. */
export const INCOMING_ABANDONED_MS = 60_000;
/** How many times {@link TieredStore.openRead} tries again when the object is replaced while it opens the file. */
const OPEN_ATTEMPTS = 5;
/** Files up to this size are read with synchronous calls to verify them (see {@link TieredStore.putWhole}). */
const SYNC_READ_MAX_BYTES = 4 * 1024 * 1024;
const readAsync = promisify(read);

function objectNotFound(id: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', `object ${id} not found`, { metadata: { object_id: id } });
}

function objectExpired(id: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_EXPIRED', `object ${id} expired (its TTL passed)`, { metadata: { object_id: id } });
}

function isErrno(err: unknown, ...codes: string[]): boolean {
  return codes.includes((err as NodeJS.ErrnoException)?.code ?? '');
}

async function unlinkQuiet(file: string): Promise<void> {
  await unlink(file).catch((err: unknown) => {
    if (!isErrno(err, 'ENOENT')) throw err;
  });
}

/** Checks an object id: non-empty, at most 1024 characters, no control characters. */
export function checkObjectId(id: string, field = 'object_id'): void {
  if (id === '') throw invalidParameter(field, 'is required');
  if (id.length > MAX_ID_LENGTH) throw invalidParameter(field, `must be at most ${MAX_ID_LENGTH} characters, got ${id.length}`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(id)) throw invalidParameter(field, 'must not contain control characters');
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
 * Capacity: each put reserves its size up front. Memory first, up to the spill threshold;
 * then disk, up to its capacity; then memory again up to its capacity; otherwise
 * RESOURCE_EXHAUSTED / STORE_FULL with a message naming both tiers' use. Expired objects are
 * dropped before a put is refused, on access, and by a periodic sweep.
 */
export class TieredStore {
  private readonly objects = new Map<string, Entry>();
  private readonly expired = new Map<string, number>();
  private readonly tiers: Record<Tier, TierState>;
  private readonly idLocks = new Map<string, Promise<unknown>>();
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;
  private closed = false;

  private constructor(private readonly opts: TieredStoreOptions) {
    this.now = opts.now ?? Date.now;
    this.tiers = {
      memory: { dir: opts.shmDir, capacity: opts.memoryCapacityBytes, used: 0, reserved: 0 },
      disk: { dir: opts.spillDir, capacity: opts.diskCapacityBytes, used: 0, reserved: 0 },
    };
    if (opts.sweepIntervalMs > 0) {
      this.timer = setInterval(() => {
        this.sweep().catch((err: unknown) => opts.log.warn({ err }, 'tensor store: sweep failed'));
      }, opts.sweepIntervalMs);
      this.timer.unref();
    }
  }

  /**
   * Creates (or takes over) the store's directories. A directory is taken over only when it
   * is empty or was made by a tensor-svc that is no longer running; leftovers of such a run
   * are deleted. Throws when another live tensor-svc owns it, or when it holds foreign files.
   */
  static async open(opts: TieredStoreOptions): Promise<TieredStore> {
    if (opts.spillThresholdBytes > opts.memoryCapacityBytes) {
      throw new RangeError('tensor store: spillThresholdBytes must not exceed memoryCapacityBytes');
    }
    await claimDir(opts.shmDir);
    await mkdir(path.join(opts.shmDir, INCOMING_DIR), { mode: DIR_MODE });
    if (opts.diskCapacityBytes > 0) await claimDir(opts.spillDir);
    return new TieredStore(opts);
  }

  /** The shared-memory directory. */
  get shmDir(): string {
    return this.opts.shmDir;
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
    const temp = this.tempPath(tier);
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
      throw invalidParameter('shm_file', `must be a file name of 1 to 128 characters [A-Za-z0-9_-], got ${JSON.stringify(fileName.slice(0, 80))}`);
    }
    this.checkOpen();
    const file = incomingPath(this.opts.shmDir, fileName);
    let fd: number | undefined;
    let copy: string | undefined;
    let reserved: Tier | undefined;
    try {
      if (header.checksum === '') throw invalidParameter('header.checksum', 'is required with shm_file');
      try {
        fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
      } catch (err) {
        if (isErrno(err, 'ENOENT')) {
          throw new DiffmeshError(
            Code.NOT_FOUND,
            'OBJECT_NOT_FOUND',
            `shm_file: no file ${fileName} in ${path.join(this.opts.shmDir, INCOMING_DIR)} (is the client on this service's node?)`,
            { metadata: { field: 'shm_file' } },
          );
        }
        if (isErrno(err, 'ELOOP')) throw invalidParameter('shm_file', 'must be a regular file, not a symbolic link');
        throw err;
      }
      const st = fstatSync(fd);
      if (!st.isFile()) throw invalidParameter('shm_file', 'must be a regular file');
      if (st.size !== header.sizeBytes) {
        throw invalidParameter('shm_file', `holds ${st.size} bytes; header.size_bytes announced ${header.sizeBytes}`);
      }
      const crc = await checksumOfFile(fd, st.size, fileName);
      const { full, tier } = await this.admit(header);
      reserved = tier;
      if (tier === 'memory') return await this.commit(full, tier, file, crc, 'sync');
      copy = this.tempPath(tier);
      await copyFile(file, copy, fsConstants.COPYFILE_EXCL).catch((err: unknown) => {
        throw this.fsError(err, tier, header);
      });
      return await this.commit(full, tier, copy, crc);
    } catch (err) {
      if (copy) await unlinkQuiet(copy).catch(() => undefined);
      if (reserved) this.unreserve(reserved, header.sizeBytes);
      throw err;
    } finally {
      if (fd !== undefined) closeSync(fd);
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

  /** Creates the temporary file of an admitted put; gives the reservation back when it cannot. */
  private async openWriter(header: ObjectHeader, tier: Tier): Promise<PutWriter> {
    const temp = this.tempPath(tier);
    let fh: FileHandle;
    try {
      fh = await open(temp, 'wx', FILE_MODE);
    } catch (err) {
      this.unreserve(tier, header.sizeBytes);
      throw this.fsError(err, tier, header);
    }
    return new PutWriter(this, header, tier, temp, fh);
  }

  private tempPath(tier: Tier): string {
    return path.join(this.tiers[tier].dir, `.part-${randomBytes(8).toString('hex')}`);
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
      let failure: unknown;
      try {
        fh = await open(entry.file, 'r');
        const st = await fh.stat();
        if (st.ino === entry.ino && st.dev === entry.dev) return new ObjectReader(copyRef(entry.ref), fh, () => this.closeReader(entry));
      } catch (err) {
        // ENOENT: deleted meanwhile, or replaced by a put of the same id.
        if (!isErrno(err, 'ENOENT')) failure = err;
      }
      this.closeReader(entry);
      await fh?.close().catch(() => undefined);
      if (failure !== undefined) throw failure;
      if (this.objects.get(objectId) === entry && !this.idLocks.has(objectId)) throw objectNotFound(objectId); // its file is gone
      if (attempt >= OPEN_ATTEMPTS) {
        throw new DiffmeshError(Code.ABORTED, 'INTERNAL', `object ${objectId} was replaced ${attempt} times while being opened; try again`, {
          metadata: { object_id: objectId },
        });
      }
      await this.idLocks.get(objectId); // the replacement in progress
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
    if (ttlMs > 0) entry.ref.ttlMs = ttlMs;
    entry.expiresAt = this.now() + entry.ref.ttlMs;
    // Under the id's lock, and only while the entry is indexed: the path may hold a newer version's file by then.
    await this.underIdLock(objectId, async () => {
      if (this.objects.get(objectId) === entry) await this.stampExpiry(entry);
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
    await this.sweepIncoming();
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

  /** Deletes files in `.incoming` that clients abandoned (untouched for {@link INCOMING_ABANDONED_MS}). */
  private async sweepIncoming(): Promise<void> {
    const dir = path.join(this.opts.shmDir, INCOMING_DIR);
    const names = await readdir(dir).catch(() => [] as string[]);
    const now = Date.now(); // file times are wall-clock times, whatever clock the store was given
    for (const name of names) {
      const file = path.join(dir, name);
      const st = await lstat(file).catch(() => undefined);
      if (st && now - st.mtimeMs > INCOMING_ABANDONED_MS) {
        await rm(file, { force: true, recursive: true }).catch(() => undefined);
        this.opts.log.debug({ file }, 'tensor store: deleted an abandoned incoming file');
      }
    }
  }

  usage(): StoreUsage {
    const count = (tier: Tier): number => [...this.objects.values()].filter((e) => e.tier === tier).length;
    const of = (tier: Tier): TierUsage => ({
      objects: count(tier),
      bytes: this.tiers[tier].used,
      reservedBytes: this.tiers[tier].reserved,
      capacityBytes: this.tiers[tier].capacity,
      dir: this.tiers[tier].dir,
    });
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
    for (const tier of ['memory', 'disk'] as const) {
      if (tier === 'disk' && this.opts.diskCapacityBytes === 0) continue;
      await releaseDir(this.tiers[tier].dir).catch((err: unknown) =>
        this.opts.log.warn({ err, dir: this.tiers[tier].dir }, 'tensor store: could not remove its directory'),
      );
    }
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
      },
      tier,
      file: tier === 'memory' ? this.shmPath(id) : path.join(this.tiers.disk.dir, `${objectFileName(id)}.v-${randomBytes(6).toString('hex')}`),
      dev: 0,
      ino: 0,
      expiresAt: now + ttlMs,
      readers: 0,
      dead: false,
    };
    // Commits of one id run one at a time, and after the file removals of a dropped version,
    // so the files and the index agree.
    return this.underIdLock(id, async () => {
      this.checkOpen();
      if (files === 'sync' && tier === 'memory') {
        ({ dev: entry.dev, ino: entry.ino } = statSync(temp));
        utimesSync(temp, new Date(now), new Date(entry.expiresAt));
        renameSync(temp, entry.file);
      } else {
        ({ dev: entry.dev, ino: entry.ino } = await stat(temp));
        await utimes(temp, new Date(now), new Date(entry.expiresAt));
        await rename(temp, entry.file);
      }
      if (entry.tier === 'disk') {
        const link = path.join(this.tiers.memory.dir, `.link-${randomBytes(8).toString('hex')}`);
        try {
          await symlink(entry.file, link);
          await rename(link, this.shmPath(id));
        } catch (err) {
          await unlinkQuiet(link).catch(() => undefined);
          await unlinkQuiet(entry.file).catch(() => undefined);
          throw err;
        }
      }
      const old = this.objects.get(id);
      this.objects.set(id, entry);
      this.expired.delete(id);
      const state = this.tiers[entry.tier];
      state.reserved -= h.sizeBytes;
      state.used += h.sizeBytes;
      if (old) {
        old.dead = true;
        this.releaseIfUnread(old);
        // The new files replaced the old ones by rename; only an old file elsewhere remains.
        if (old.file !== entry.file && old.file !== this.shmPath(id)) {
          await unlinkQuiet(old.file).catch((err: unknown) => this.opts.log.warn({ err, file: old.file }, 'tensor store: could not delete a replaced file'));
        }
      }
      return copyRef(entry.ref);
    });
  }

  /**
   * Runs `fn` once every earlier operation on the files of `id` (commits, removals of dropped
   * versions, expiry stamps) has finished, and before any later one starts.
   */
  private underIdLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.idLocks.get(id) ?? Promise.resolve();
    const run = previous.then(fn);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.idLocks.set(id, settled);
    void settled.then(() => {
      if (this.idLocks.get(id) === settled) this.idLocks.delete(id);
    });
    return run;
  }

  /** Gives back a put's reservation (after an abort). */
  unreserve(tier: Tier, bytes: number): void {
    this.tiers[tier].reserved -= bytes;
  }

  /** The error to report for a failed file operation on `tier`. */
  fsError(err: unknown, tier: Tier, header: Pick<ObjectHeader, 'name' | 'sizeBytes'>): Error {
    if (isErrno(err, 'ENOSPC', 'EDQUOT')) {
      return new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `tensor store full: no space left in ${this.tiers[tier].dir} (${tier === 'memory' ? 'shared memory' : 'spill disk'}) while writing "${header.name}" (${formatBytes(header.sizeBytes)})`,
        { retryAfterMs: this.opts.retryAfterMs, metadata: { tier, dir: this.tiers[tier].dir } },
      );
    }
    return err instanceof Error ? err : new Error(String(err));
  }

  // ---- internals ----

  private shmPath(id: string): string {
    return path.join(this.tiers.memory.dir, objectFileName(id));
  }

  /** Picks the tier for a new object and reserves its bytes there, or throws STORE_FULL. */
  private async reserve(h: ObjectHeader): Promise<Tier> {
    let tier = this.place(h.sizeBytes);
    if (!tier) {
      await this.sweep();
      tier = this.place(h.sizeBytes);
    }
    if (!tier) throw this.storeFull(h);
    this.tiers[tier].reserved += h.sizeBytes;
    return tier;
  }

  private place(size: number): Tier | undefined {
    const mem = this.tiers.memory;
    const disk = this.tiers.disk;
    const memUse = mem.used + mem.reserved;
    if (memUse + size <= this.opts.spillThresholdBytes) return 'memory';
    if (disk.capacity > 0 && disk.used + disk.reserved + size <= disk.capacity) return 'disk';
    if (memUse + size <= mem.capacity) return 'memory';
    return undefined;
  }

  private storeFull(h: ObjectHeader): DiffmeshError {
    const mem = this.tiers.memory;
    const disk = this.tiers.disk;
    const what = `"${h.name}" (${formatBytes(h.sizeBytes)})`;
    const metadata = {
      size_bytes: String(h.sizeBytes),
      memory_used_bytes: String(mem.used + mem.reserved),
      memory_capacity_bytes: String(mem.capacity),
      disk_used_bytes: String(disk.used + disk.reserved),
      disk_capacity_bytes: String(disk.capacity),
    };
    const diskPart = disk.capacity > 0 ? `disk ${formatBytes(disk.capacity)}` : 'no disk spill configured';
    if (h.sizeBytes > Math.max(mem.capacity, disk.capacity)) {
      return new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `tensor store cannot hold ${what}: larger than its capacity (shared memory ${formatBytes(mem.capacity)}, ${diskPart})`,
        { metadata },
      );
    }
    const diskUse = disk.capacity > 0 ? `disk ${formatBytes(disk.used + disk.reserved)} of ${formatBytes(disk.capacity)} in use` : 'no disk spill configured';
    return new DiffmeshError(
      Code.RESOURCE_EXHAUSTED,
      'STORE_FULL',
      `tensor store full: cannot hold ${what}; shared memory ${formatBytes(mem.used + mem.reserved)} of ${formatBytes(mem.capacity)} in use, ${diskUse}`,
      { retryAfterMs: this.opts.retryAfterMs, metadata },
    );
  }

  /** The entry of a live object; throws NOT_FOUND (OBJECT_EXPIRED past its TTL). */
  private live(id: string): Entry {
    this.checkOpen();
    const entry = this.objects.get(id);
    if (!entry) {
      if (this.expired.has(id)) throw objectExpired(id);
      throw objectNotFound(id);
    }
    if (this.now() >= entry.expiresAt) {
      void this.expire(entry).catch((err: unknown) => this.opts.log.warn({ err, objectId: id }, 'tensor store: could not delete expired object'));
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
    await this.underIdLock(id, async () => {
      if (!this.objects.has(id)) await unlinkQuiet(this.shmPath(id));
      if (entry.tier === 'disk' && this.objects.get(id)?.file !== entry.file) await unlinkQuiet(entry.file);
    });
  }

  private closeReader(entry: Entry): void {
    entry.readers -= 1;
    this.releaseIfUnread(entry);
  }

  /** A dead entry's bytes stay counted while readers hold its file open. */
  private releaseIfUnread(entry: Entry): void {
    if (entry.dead && entry.readers === 0) {
      this.tiers[entry.tier].used -= entry.ref.sizeBytes;
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

/**
 * Receives one object's bytes in order into a temporary file. `commit` verifies size and
 * checksum and publishes the object; `abort` removes the file and frees the reservation.
 */
export class PutWriter {
  private received = 0;
  private crc = 0;
  private finished = false;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly store: TieredStore,
    /** The header with its final object id. */
    readonly header: ObjectHeader,
    readonly tier: Tier,
    private readonly temp: string,
    private readonly fh: FileHandle,
  ) {}

  /** Bytes received so far. */
  get bytesReceived(): number {
    return this.received;
  }

  /**
   * Accepts the next chunk: checks its offset and size and folds it into the checksum at
   * once (throws INVALID_ARGUMENT synchronously), then writes it at its position. Writes of
   * successive chunks may overlap; {@link commit} waits for all of them.
   */
  write(offset: number, data: Uint8Array): Promise<void> {
    if (this.finished) throw new Error('PutWriter: write after commit or abort');
    if (offset !== this.received) {
      throw invalidParameter('chunk.offset', `expected ${this.received} (chunks come in order, without gaps), got ${offset}`);
    }
    if (this.received + data.byteLength > this.header.sizeBytes) {
      throw invalidParameter(
        'chunk.data',
        `${this.received + data.byteLength} bytes received; header.size_bytes announced ${this.header.sizeBytes}`,
      );
    }
    this.crc = crc32c(data, this.crc);
    this.received += data.byteLength;
    const p = this.writeAt(data, offset);
    this.pending.add(p);
    // A failed write is reported by the caller's promise and again by commit.
    void p.then(
      () => this.pending.delete(p),
      () => undefined,
    );
    return p;
  }

  private async writeAt(data: Uint8Array, offset: number): Promise<void> {
    try {
      let done = 0;
      while (done < data.byteLength) {
        const { bytesWritten } = await this.fh.write(data, done, data.byteLength - done, offset + done);
        done += bytesWritten;
      }
    } catch (err) {
      throw this.store.fsError(err, this.tier, this.header);
    }
  }

  /** Checks that every byte arrived and matches the checksum, then publishes the object. */
  async commit(): Promise<ObjectRef> {
    if (this.finished) throw new Error('PutWriter: commit after commit or abort');
    if (this.received !== this.header.sizeBytes) {
      throw invalidParameter('header.size_bytes', `the stream ended after ${this.received} of ${this.header.sizeBytes} bytes`);
    }
    this.finished = true;
    try {
      await Promise.all(this.pending);
      await this.fh.close();
      return await this.store.commit(this.header, this.tier, this.temp, this.crc);
    } catch (err) {
      await unlinkQuiet(this.temp).catch(() => undefined);
      this.store.unreserve(this.tier, this.header.sizeBytes);
      throw err instanceof DiffmeshError ? err : this.store.fsError(err, this.tier, this.header);
    }
  }

  /** Discards the bytes received. Idempotent; never throws. */
  async abort(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await Promise.allSettled(this.pending);
    await this.fh.close().catch(() => undefined);
    await unlinkQuiet(this.temp).catch(() => undefined);
    this.store.unreserve(this.tier, this.header.sizeBytes);
  }
}

/** An open object: positional reads from its file, whatever happens to the object meanwhile. */
export class ObjectReader {
  private closed = false;

  constructor(
    readonly ref: ObjectRef,
    private readonly fh: FileHandle,
    private readonly onClose: () => void,
  ) {}

  /**
   * Fills `buf[0, length)` from `position`. Throws DATA_LOSS when the file is shorter than the
   * object (truncated on disk).
   */
  async readExactly(buf: Buffer, length: number, position: number): Promise<void> {
    let done = 0;
    while (done < length) {
      const { bytesRead } = await this.fh.read(buf, done, length - done, position + done);
      if (bytesRead === 0) {
        throw new DiffmeshError(
          Code.DATA_LOSS,
          'CHECKSUM_MISMATCH',
          `object ${this.ref.objectId}: its file ends at ${position + done} of ${this.ref.sizeBytes} bytes`,
          { metadata: { object_id: this.ref.objectId } },
        );
      }
      done += bytesRead;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    await this.fh.close().catch(() => undefined);
  }
}

function copyRef(ref: ObjectRef): ObjectRef {
  return { ...ref, shape: [...ref.shape] };
}

/**
 * Makes `dir` this process's: creates it, or takes over one made by a tensor-svc that is gone
 * (deleting its leftovers). Refuses a directory with files a tensor-svc did not make, and one
 * whose owner is still running.
 */
async function claimDir(dir: string): Promise<void> {
  const key = path.resolve(dir);
  if (claimedHere.has(key)) throw new Error(`${dir} is in use by another tensor-svc in this process; give each its own shmDir and spillDir`);
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  const marker = path.join(dir, DIR_MARKER);
  const names = await readdir(dir);
  if (names.includes(DIR_MARKER)) {
    const [pidText = '', start] = (await readFile(marker, 'utf8').catch(() => '')).trim().split(/\s+/);
    const pid = Number(pidText);
    if (Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && (await ownerRunning(pid, start))) {
      throw new Error(`${dir} is in use by another tensor-svc (pid ${pid}); give each tensor-svc its own nodeId, shmDir and spillDir`);
    }
    for (const name of names) if (name !== DIR_MARKER) await rm(path.join(dir, name), { force: true, recursive: true });
  } else if (names.length > 0) {
    throw new Error(`${dir} holds files tensor-svc did not create; point tensor-svc at an empty or new directory`);
  }
  const start = await processStartTime(process.pid);
  await writeFile(marker, start === undefined ? `${process.pid}\n` : `${process.pid} ${start}\n`, { mode: FILE_MODE });
  claimedHere.add(key);
}

/** Directories claimed by stores of this process (the pid in the marker cannot tell them apart). */
const claimedHere = new Set<string>();

/** Deletes what {@link claimDir} claimed: every file in it, the marker, and the directory. */
async function releaseDir(dir: string): Promise<void> {
  claimedHere.delete(path.resolve(dir));
  const names = await readdir(dir).catch((err: unknown) => {
    if (isErrno(err, 'ENOENT')) return [] as string[];
    throw err;
  });
  for (const name of names) if (name !== DIR_MARKER) await rm(path.join(dir, name), { force: true, recursive: true });
  await unlinkQuiet(path.join(dir, DIR_MARKER));
  await rmdir(dir).catch((err: unknown) => {
    if (!isErrno(err, 'ENOENT', 'ENOTEMPTY')) throw err;
  });
}

/**
 * Whether the tensor-svc that wrote a marker with `pid` (and `start`, its start time, when
 * recorded) is still running. A process with that pid but another start time is not it: pids
 * are reused, all the more in containers, where a restarted service often finds its old pid
 * taken by an unrelated process. Without a start time to compare, a live pid counts.
 */
async function ownerRunning(pid: number, start: string | undefined): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if (!isErrno(err, 'EPERM')) return false;
  }
  if (start === undefined) return true;
  const now = await processStartTime(pid);
  return now === undefined || now === start;
}

/** A process's start time (clock ticks after boot, field 22 of /proc/<pid>/stat); undefined without /proc. */
async function processStartTime(pid: number): Promise<string | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  // The command name (field 2) is in parentheses and may hold spaces: count from its end.
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields?.[19];
}

/**
 * The crc32c of a file's `size` bytes, read through `fd` (synchronously up to
 * {@link SYNC_READ_MAX_BYTES}: on tmpfs a read is a memory copy). A file shorter than its
 * size (truncated meanwhile) is an INVALID_ARGUMENT about `shm_file`.
 */
async function checksumOfFile(fd: number, size: number, fileName: string): Promise<number> {
  const buf = Buffer.allocUnsafe(Math.min(size, SYNC_READ_MAX_BYTES));
  let crc = 0;
  for (let pos = 0; pos < size; ) {
    const want = Math.min(buf.byteLength, size - pos);
    const n = size <= SYNC_READ_MAX_BYTES ? readSync(fd, buf, 0, want, pos) : (await readAsync(fd, buf, 0, want, pos)).bytesRead;
    if (n === 0) throw invalidParameter('shm_file', `${fileName} ended after ${pos} of ${size} bytes`);
    crc = crc32c(buf.subarray(0, n), crc);
    pos += n;
  }
  return crc;
}
