/**
 * What the store keeps beside each object's bytes so that a restarted tensor-svc finds it
 * again: the object's ref (shape, dtype, checksum, TTL, durable copy) in a small JSON file
 * `<dir>/.meta/<data file name>`. The object's expiry is its data file's mtime, as same-node
 * readers already use it. A sidecar is written before its data file is published and renamed
 * into place, so it never names bytes that are half written.
 */
import { randomBytes } from 'node:crypto';
import { renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { readFile, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ObjectRef } from '@diffmesh/core';
import { isErrno, unlinkQuiet } from './fs-util.js';

/** Folder of the sidecars in each of the store's directories. */
export const META_DIR = '.meta';

/** Where the sidecar of `dataFile` is. */
export function sidecarPath(dataFile: string): string {
  return path.join(path.dirname(dataFile), META_DIR, path.basename(dataFile));
}

interface SidecarBody {
  v: 1;
  ref: ObjectRef;
}

function body(ref: ObjectRef): string {
  const { inlineData: _inline, ...rest } = ref;
  return JSON.stringify({ v: 1, ref: rest } satisfies SidecarBody);
}

/** Writes (or replaces) the sidecar of `dataFile` atomically: a temporary file, then a rename. */
export async function writeSidecar(dataFile: string, ref: ObjectRef, mode: FileMode, files: 'async' | 'sync' = 'async'): Promise<void> {
  const target = sidecarPath(dataFile);
  const temp = path.join(path.dirname(target), `.tmp-${randomBytes(6).toString('hex')}`);
  if (files === 'sync') {
    try {
      writeFileSync(temp, body(ref), { mode });
      renameSync(temp, target);
    } catch (err) {
      try {
        unlinkSync(temp);
      } catch {
        // never created
      }
      throw err;
    }
    return;
  }
  try {
    await writeFile(temp, body(ref), { mode });
    await rename(temp, target);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}

type FileMode = number;

/** The ref in the sidecar of `dataFile`; undefined when there is none or it cannot be read. */
export async function readSidecar(dataFile: string): Promise<ObjectRef | undefined> {
  try {
    const parsed = JSON.parse(await readFile(sidecarPath(dataFile), 'utf8')) as Partial<SidecarBody>;
    const ref = parsed.ref;
    if (parsed.v !== 1 || !ref || typeof ref.objectId !== 'string' || typeof ref.checksum !== 'string' || !Array.isArray(ref.shape)) {
      return undefined;
    }
    return ref;
  } catch (err) {
    if (isErrno(err, 'ENOENT') || err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/** Deletes the sidecar of `dataFile`, if any. */
export async function removeSidecar(dataFile: string): Promise<void> {
  await unlinkQuiet(sidecarPath(dataFile));
}
