/**
 * Restart recovery: the objects a tensor-svc that is gone (killed, crashed) left in its
 * shared-memory and spill directories, found again from their sidecars. Objects whose TTL ran
 * out meanwhile are deleted, and so is whatever cannot be an object any more: bytes without a
 * sidecar, sidecars without bytes, a file whose size is not its ref's.
 */
import { lstat, readdir, readlink, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger, ObjectRef } from '@diffmesh/core';
import { objectFileName } from '@diffmesh/tensor-client';
import { unlinkQuiet } from './fs-util.js';
import type { Tier } from './placement.js';
import { META_DIR, readSidecar, removeSidecar, sidecarPath } from './sidecar.js';

/** An object found again. */
export interface RecoveredObject {
  ref: ObjectRef;
  tier: Tier;
  /** Its data file. */
  file: string;
  dev: number;
  ino: number;
  expiresAt: number;
}

/** What {@link recoverObjects} found. */
export interface RecoveryResult {
  objects: RecoveredObject[];
  /** Objects deleted because their TTL ran out while the service was down. */
  expired: number;
  /** Files deleted because they were no complete object. */
  orphans: number;
}

/**
 * Scans `shmDir` (objects in memory, links to spilled ones) and `spillDir`, returns the live
 * objects and deletes the rest. `now` is wall-clock time: file times are.
 */
export async function recoverObjects(shmDir: string, spillDir: string | undefined, now: number, log: Logger): Promise<RecoveryResult> {
  const result: RecoveryResult = { objects: [], expired: 0, orphans: 0 };
  const keptSpill = new Set<string>();
  const drop = async (files: string[], why: 'expired' | 'orphan'): Promise<void> => {
    for (const f of files) {
      await unlinkQuiet(f).catch(() => undefined);
      await removeSidecar(f).catch(() => undefined);
    }
    if (why === 'expired') result.expired += 1;
    else result.orphans += 1;
  };
  for (const name of await readdir(shmDir)) {
    if (name.startsWith('.')) continue;
    const entry = path.join(shmDir, name);
    const st = await lstat(entry).catch(() => undefined);
    if (!st) continue;
    let tier: Tier;
    let file: string;
    if (st.isFile()) {
      tier = 'memory';
      file = entry;
    } else if (st.isSymbolicLink() && spillDir) {
      const target = path.resolve(shmDir, await readlink(entry));
      if (path.dirname(target) !== path.resolve(spillDir)) {
        await drop([entry], 'orphan');
        continue;
      }
      tier = 'disk';
      file = target;
    } else {
      await drop([entry], 'orphan');
      continue;
    }
    const data = await stat(file).catch(() => undefined);
    const ref = data?.isFile() ? await readSidecar(file) : undefined;
    const files = tier === 'disk' ? [entry, file] : [entry];
    if (!data || !ref || objectFileName(ref.objectId) !== name || data.size !== ref.sizeBytes) {
      await drop(files, 'orphan');
      continue;
    }
    if (data.mtimeMs <= now) {
      await drop(files, 'expired');
      continue;
    }
    if (tier === 'disk') keptSpill.add(path.basename(file));
    result.objects.push({ ref, tier, file, dev: data.dev, ino: data.ino, expiresAt: Math.round(data.mtimeMs) });
  }
  // Spilled bytes no link names, and sidecars without bytes.
  if (spillDir) {
    for (const name of await readdir(spillDir)) {
      if (!name.startsWith('.') && !keptSpill.has(name)) await drop([path.join(spillDir, name)], 'orphan');
    }
  }
  for (const dir of spillDir ? [shmDir, spillDir] : [shmDir]) {
    for (const name of await readdir(path.join(dir, META_DIR)).catch(() => [] as string[])) {
      const dataFile = path.join(dir, name);
      const owner = await lstat(dataFile).catch(() => undefined);
      if (!owner) await unlinkQuiet(sidecarPath(dataFile)).catch(() => undefined);
    }
  }
  if (result.objects.length + result.expired + result.orphans > 0) {
    log.info(
      { recovered: result.objects.length, expired: result.expired, orphans: result.orphans, shmDir, spillDir },
      'tensor store: recovered the objects of the previous run',
    );
  }
  return result;
}
