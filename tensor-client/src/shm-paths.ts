import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Where a tensor-svc publishes its objects for readers on the same node, and how an object
 * id maps to a file name there. The service and every client derive both from the node id,
 * so a same-node reader finds `<shmDir>/<objectFileName(id)>` without asking the service.
 */

/** Root of POSIX shared memory on Linux (tmpfs: RAM, not disk). */
export const SHM_ROOT = '/dev/shm';

/** Longest file name produced by {@link objectFileName} before it switches to a digest. */
const MAX_FILE_NAME = 200;

/** Characters kept as they are in file names; everything else is percent-encoded. */
const KEEP = /[A-Za-z0-9_.~:@+=,-]/;

/** `node-1` → `node-1`; anything outside `[A-Za-z0-9_.-]` becomes `_`. */
function safeSegment(s: string): string {
  return s.replace(/[^A-Za-z0-9_.-]/g, '_') || '_';
}

/** True when `dir` exists and is a directory. */
function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The shared-memory directory of the tensor-svc of `nodeId`: `/dev/shm/diffmesh-<nodeId>`,
 * or `<os.tmpdir()>/diffmesh-shm-<nodeId>` where `/dev/shm` does not exist (macOS, some
 * containers). Pass `shmRoot` to use another tmpfs.
 */
export function defaultShmDir(nodeId: string, shmRoot: string = SHM_ROOT): string {
  const node = safeSegment(nodeId);
  return isDirectory(shmRoot) ? path.join(shmRoot, `diffmesh-${node}`) : path.join(tmpdir(), `diffmesh-shm-${node}`);
}

/**
 * The file name of an object in a tensor-svc directory. Ids made of `[A-Za-z0-9_.~:@+=,-]`
 * (the usual `{requestId}:{name}:{hex}`) are used as they are; other characters are
 * percent-encoded (UTF-8), a leading `.` too, so names never collide with the service's
 * hidden temporary files. Names longer than 200 characters become `!<sha256>` (`!` never
 * occurs in an encoded name). Injective: different ids never share a file.
 */
export function objectFileName(objectId: string): string {
  let out = '';
  for (const ch of objectId) {
    out += KEEP.test(ch) ? ch : [...Buffer.from(ch, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
  }
  if (out.startsWith('.')) out = `%2E${out.slice(1)}`;
  if (out === '' || out.length > MAX_FILE_NAME) out = `!${createHash('sha256').update(objectId, 'utf8').digest('hex')}`;
  return out;
}

/** `<dir>/<objectFileName(objectId)>`. */
export function objectPath(dir: string, objectId: string): string {
  return path.join(dir, objectFileName(objectId));
}

/**
 * Folder of a tensor-svc's shared-memory directory where clients on its node write the bytes
 * of objects they put through shared memory (PutObjects with `shm_file`). Object files never
 * start with `.`, so it cannot collide with one.
 */
export const INCOMING_DIR = '.incoming';

/** Names a client may give its file in {@link INCOMING_DIR}: no path separators, no dots. */
const INCOMING_NAME = /^[A-Za-z0-9_-]{1,128}$/;

/** True when `name` is a valid file name in {@link INCOMING_DIR}. */
export function isIncomingFileName(name: string): boolean {
  return INCOMING_NAME.test(name);
}

/** `<shmDir>/.incoming/<name>`. */
export function incomingPath(shmDir: string, name: string): string {
  return path.join(shmDir, INCOMING_DIR, name);
}
