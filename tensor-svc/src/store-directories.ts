/**
 * The tensor store's directories on this node, and their ownership: the shared-memory
 * directory (with `.incoming` for same-node puts) and the spill directory. A directory is
 * claimed for one tensor-svc at a time through a marker file; one left by a tensor-svc that
 * no longer runs is emptied and taken over. Files clients left in `.incoming` are swept.
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readFile, readdir, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { INCOMING_DIR, incomingPath, objectFileName } from '@diffmesh/tensor-client';
import { type Logger } from '@diffmesh/core';
import { isErrno, unlinkQuiet } from './fs-util.js';
import type { Tier } from './placement.js';
import { META_DIR } from './sidecar.js';

/**
 * Name of the file marking a directory as a tensor-svc's own; it holds the owner's pid and,
 * where /proc exists, the process's start time (`<pid> <start>`), which tells the owner
 * from an unrelated process that got its pid later.
 */
export const DIR_MARKER = '.tensor-svc';
/** A file in `.incoming` untouched this long was left by a client that went away before sending its put. */
export const INCOMING_ABANDONED_MS = 60_000;
/** Mode of the store's files. */
export const FILE_MODE = 0o640;
const DIR_MODE = 0o750;

/** Where {@link StoreDirectories.claim} puts the store. */
export interface StoreDirectoriesOptions {
  shmDir: string;
  spillDir: string;
  /** Whether there is a disk tier (the spill directory is claimed only then). */
  spill: boolean;
  /**
   * Keep the objects (and their sidecars) of a tensor-svc that is gone, for the store to
   * recover; only its unfinished files are deleted. Default false: leftovers are deleted.
   */
  keep?: boolean;
}

/**
 * The store's two directories, owned by this process from {@link claim} to {@link release},
 * and the names of the files in them.
 */
export class StoreDirectories {
  private constructor(private readonly opts: StoreDirectoriesOptions) {}

  /**
   * Creates (or takes over) the directories. A directory is taken over only when it is empty
   * or was made by a tensor-svc that is no longer running; leftovers of such a run are
   * deleted. Throws when another live tensor-svc owns it, or when it holds foreign files.
   */
  static async claim(opts: StoreDirectoriesOptions): Promise<StoreDirectories> {
    await claimDir(opts.shmDir, opts.keep ?? false);
    await mkdir(path.join(opts.shmDir, INCOMING_DIR), { mode: DIR_MODE });
    await mkdir(path.join(opts.shmDir, META_DIR), { recursive: true, mode: DIR_MODE });
    if (opts.spill) {
      await claimDir(opts.spillDir, opts.keep ?? false);
      await mkdir(path.join(opts.spillDir, META_DIR), { recursive: true, mode: DIR_MODE });
    }
    return new StoreDirectories(opts);
  }

  /** The spill directory, when there is a disk tier. */
  get spillDir(): string | undefined {
    return this.opts.spill ? this.opts.spillDir : undefined;
  }

  /** The shared-memory directory. */
  get shmDir(): string {
    return this.opts.shmDir;
  }

  /** Where an object is found by same-node readers, whatever its tier: `shmDir/<objectFileName(id)>`. */
  shmPath(id: string): string {
    return path.join(this.opts.shmDir, objectFileName(id));
  }

  /** A new data file in the spill directory: a name of its own per version, so a replacement never writes over a version still indexed or read. */
  spillPath(id: string): string {
    return path.join(this.opts.spillDir, `${objectFileName(id)}.v-${randomBytes(6).toString('hex')}`);
  }

  /** A new hidden temporary file in `tier`'s directory, where a put writes before it is published. */
  tempPath(tier: Tier): string {
    return path.join(tier === 'memory' ? this.opts.shmDir : this.opts.spillDir, `.part-${randomBytes(8).toString('hex')}`);
  }

  /** A new hidden name in shared memory for a link being made. */
  linkTempPath(): string {
    return path.join(this.opts.shmDir, `.link-${randomBytes(8).toString('hex')}`);
  }

  /** The file a same-node client wrote in `.incoming` (the name is checked by the caller). */
  incomingFile(fileName: string): string {
    return incomingPath(this.opts.shmDir, fileName);
  }

  /** The `.incoming` folder. */
  get incomingDir(): string {
    return path.join(this.opts.shmDir, INCOMING_DIR);
  }

  /** Deletes files in `.incoming` that clients abandoned (untouched for {@link INCOMING_ABANDONED_MS}). */
  async sweepAbandoned(log: Logger): Promise<void> {
    const dir = this.incomingDir;
    const names = await readdir(dir).catch(() => [] as string[]);
    const now = Date.now(); // file times are wall-clock times, whatever clock the store was given
    for (const name of names) {
      const file = path.join(dir, name);
      const st = await lstat(file).catch(() => undefined);
      if (st && now - st.mtimeMs > INCOMING_ABANDONED_MS) {
        await rm(file, { force: true, recursive: true }).catch(() => undefined);
        log.debug({ file }, 'tensor store: deleted an abandoned incoming file');
      }
    }
  }

  /** Deletes every file and both directories; a directory that cannot be removed is logged. */
  async release(log: Logger): Promise<void> {
    const dirs = this.opts.spill ? [this.opts.shmDir, this.opts.spillDir] : [this.opts.shmDir];
    for (const dir of dirs) {
      await releaseDir(dir).catch((err: unknown) => log.warn({ err, dir }, 'tensor store: could not remove its directory'));
    }
  }
}

/** Directories claimed by stores of this process (the pid in the marker cannot tell them apart). */
const claimedHere = new Set<string>();

/**
 * Makes `dir` this process's: creates it, or takes over one made by a tensor-svc that is gone
 * (deleting its leftovers, or with `keep` only its unfinished files: temporary files and
 * clients' incoming files). Refuses a directory with files a tensor-svc did not make, and one
 * whose owner is still running.
 */
async function claimDir(dir: string, keep: boolean): Promise<void> {
  const key = path.resolve(dir);
  if (claimedHere.has(key))
    throw new Error(`${dir} is in use by another tensor-svc in this process; give each its own shmDir and spillDir`);
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  const marker = path.join(dir, DIR_MARKER);
  const names = await readdir(dir);
  if (names.includes(DIR_MARKER)) {
    const [pidText = '', start] = (await readFile(marker, 'utf8').catch(() => '')).trim().split(/\s+/);
    const pid = Number(pidText);
    if (Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && (await ownerRunning(pid, start))) {
      throw new Error(`${dir} is in use by another tensor-svc (pid ${pid}); give each tensor-svc its own nodeId, shmDir and spillDir`);
    }
    for (const name of names) {
      if (name === DIR_MARKER || (keep && (name === META_DIR || !name.startsWith('.')))) continue;
      await rm(path.join(dir, name), { force: true, recursive: true });
    }
  } else if (names.length > 0) {
    throw new Error(`${dir} holds files tensor-svc did not create; point tensor-svc at an empty or new directory`);
  }
  const start = await processStartTime(process.pid);
  await writeFile(marker, start === undefined ? `${process.pid}\n` : `${process.pid} ${start}\n`, { mode: FILE_MODE });
  claimedHere.add(key);
}

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
