/**
 * Writing objects' bytes into a tier: a put streamed chunk by chunk into a temporary file
 * ({@link PutWriter}), the check of a file a same-node client handed over in `.incoming`, and
 * the publication of a completed file under its object's name. A file appears only once its
 * bytes are complete and verified, and its mtime is the object's expiry.
 */
import { constants as fsConstants, closeSync, fstatSync, openSync, read, readSync, renameSync, statSync, utimesSync } from 'node:fs';
import { rename, stat, symlink, utimes, type FileHandle } from 'node:fs/promises';
import { promisify } from 'node:util';
import { crc32c } from '@node-rs/crc32';
import { Code, DiffmeshError, invalidParameter, type ObjectRef } from '@diffmesh/core';
import { isErrno, unlinkQuiet } from './fs-util.js';
import type { ObjectHeader } from './object-header.js';
import type { Tier } from './placement.js';

/** Files up to this size are read with synchronous calls to verify them (see {@link checksumOfIncomingFile}). */
const SYNC_READ_MAX_BYTES = 4 * 1024 * 1024;
const readAsync = promisify(read);

/** What a {@link PutWriter} hands its file to: the store that admitted the put. */
export interface PutTarget {
  /** Publishes the completed file `temp` as the object `header` describes. */
  commit(header: ObjectHeader, tier: Tier, temp: string, crc: number): Promise<ObjectRef>;
  /** Gives back the put's reservation. */
  unreserve(tier: Tier, bytes: number): void;
  /** The error to report for a failed file operation on `tier`. */
  fsError(err: unknown, tier: Tier, header: Pick<ObjectHeader, 'name' | 'sizeBytes'>): Error;
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
    private readonly store: PutTarget,
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

/** Where {@link publishFile} puts a completed file. */
export interface Publication {
  tier: Tier;
  /** The object's data file. */
  file: string;
  /**
   * Disk tier: the link to the data file at `shmDir/<objectFileName(id)>` (`path`), made under
   * the hidden name `temp` first.
   */
  link?: { path: string; temp: string };
  createdAt: number;
  expiresAt: number;
}

/**
 * Publishes the completed file `temp`: stamps its mtime with the expiry and renames it to its
 * data file; a disk-tier file also gets its symbolic link in shared memory (made under a
 * hidden name, then renamed into place; on failure the data file is deleted). Returns the
 * data file's identity. `files: 'sync'` stamps and renames a shared-memory file with
 * synchronous calls (on tmpfs they copy memory for microseconds, cheaper than round trips
 * through libuv's thread pool).
 */
export async function publishFile(temp: string, p: Publication, files: 'async' | 'sync'): Promise<{ dev: number; ino: number }> {
  let st: { dev: number; ino: number };
  if (files === 'sync' && p.tier === 'memory') {
    st = statSync(temp);
    utimesSync(temp, new Date(p.createdAt), new Date(p.expiresAt));
    renameSync(temp, p.file);
  } else {
    st = await stat(temp);
    await utimes(temp, new Date(p.createdAt), new Date(p.expiresAt));
    await rename(temp, p.file);
  }
  if (p.link) {
    try {
      await symlink(p.file, p.link.temp);
      await rename(p.link.temp, p.link.path);
    } catch (err) {
      await unlinkQuiet(p.link.temp).catch(() => undefined);
      await unlinkQuiet(p.file).catch(() => undefined);
      throw err;
    }
  }
  return { dev: st.dev, ino: st.ino };
}

/**
 * Checks a file a same-node client wrote in `.incoming` (PutObjects with `shm_file`) against
 * `header`: a regular file there, never a link, of `header.sizeBytes` bytes; returns the
 * crc32c of its bytes. A name that is not there is NOT_FOUND naming `shm_file`.
 */
export async function checksumOfIncomingFile(file: string, fileName: string, incomingDir: string, header: ObjectHeader): Promise<number> {
  let fd: number;
  try {
    fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) {
      throw new DiffmeshError(
        Code.NOT_FOUND,
        'OBJECT_NOT_FOUND',
        `shm_file: no file ${fileName} in ${incomingDir} (is the client on this service's node?)`,
        { metadata: { field: 'shm_file' } },
      );
    }
    if (isErrno(err, 'ELOOP')) throw invalidParameter('shm_file', 'must be a regular file, not a symbolic link');
    throw err;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw invalidParameter('shm_file', 'must be a regular file');
    if (st.size !== header.sizeBytes) {
      throw invalidParameter('shm_file', `holds ${st.size} bytes; header.size_bytes announced ${header.sizeBytes}`);
    }
    return await checksumOfFile(fd, st.size, fileName);
  } finally {
    closeSync(fd);
  }
}

/**
 * The crc32c of a file's `size` bytes, read through `fd` (synchronously up to
 * {@link SYNC_READ_MAX_BYTES}: on tmpfs a read is a memory copy). A file shorter than its
 * size (truncated meanwhile) is an INVALID_ARGUMENT about `shm_file`.
 */
async function checksumOfFile(fd: number, size: number, fileName: string): Promise<number> {
  const buf = Buffer.allocUnsafe(Math.min(size, SYNC_READ_MAX_BYTES));
  let crc = 0;
  for (let pos = 0; pos < size;) {
    const want = Math.min(buf.byteLength, size - pos);
    const n = size <= SYNC_READ_MAX_BYTES ? readSync(fd, buf, 0, want, pos) : (await readAsync(fd, buf, 0, want, pos)).bytesRead;
    if (n === 0) throw invalidParameter('shm_file', `${fileName} ended after ${pos} of ${size} bytes`);
    crc = crc32c(buf.subarray(0, n), crc);
    pos += n;
  }
  return crc;
}
