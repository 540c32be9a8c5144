/**
 * Object capabilities: the proof that a caller was handed an object's ObjectRef. When the
 * service stores an object it issues `v1.<mac>` — an HMAC-SHA256 of the object id under the
 * service's capability key — in the ref it answers; Get, Stat, Touch and Delete then need it.
 * Refs travel only to those who should read the object (the stage that made it, the
 * scheduler, the next stages, the request's own client), so a stage or client of another
 * request, or another tenant, cannot read, keep alive or delete it, even knowing its id.
 *
 * The key is read from a file (shared by the tensor services of a mesh that should honour
 * each other's refs, e.g. a mounted Secret), or made once and kept in a 0600 file so that
 * refs survive a restart. What capabilities do not cover: same-node readers that map an
 * object from shared memory (the shm directory's permissions guard those) and durable
 * copies in redis or S3 (their own credentials guard those).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Code, DiffmeshError } from '@diffmesh/core';

const PREFIX = 'v1.';
/** Bytes of a generated key. */
const KEY_BYTES = 32;

export class ObjectCapabilities {
  private constructor(private readonly key: Buffer | undefined) {}

  /** Capabilities off: nothing issued, nothing required. */
  static off(): ObjectCapabilities {
    return new ObjectCapabilities(undefined);
  }

  /** With this key (at least 16 bytes). */
  static withKey(key: Buffer): ObjectCapabilities {
    if (key.length < 16) throw new Error('capability key: at least 16 bytes');
    return new ObjectCapabilities(Buffer.from(key));
  }

  /**
   * The key in `file`; when the file does not exist, a new random key written there first
   * (mode 0600). Throws a message naming the file when it cannot be read or made.
   */
  static fromFile(file: string): ObjectCapabilities {
    try {
      return ObjectCapabilities.withKey(readFileSync(file));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`capability key file ${file}: ${(err as Error).message}`);
    }
    try {
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      // 'wx': when another process made it meanwhile, that one's key is the key.
      writeFileSync(file, randomBytes(KEY_BYTES), { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new Error(`capability key file ${file}: ${(err as Error).message}`);
    }
    return ObjectCapabilities.withKey(readFileSync(file));
  }

  get enabled(): boolean {
    return this.key !== undefined;
  }

  /** The capability of object `id` (undefined when capabilities are off). */
  issue(id: string): string | undefined {
    return this.key ? PREFIX + this.mac(id).toString('base64url') : undefined;
  }

  /**
   * Throws PERMISSION_DENIED / CAPABILITY_REQUIRED unless `capability` is object `id`'s. The
   * answer is the same whether or not the object exists, so it tells nothing of other ids.
   */
  check(id: string, capability: string): void {
    if (!this.key) return;
    if (capability === '') {
      throw denied(id, 'capability: is required: pass the capability of the object’s ObjectRef');
    }
    const given = capability.startsWith(PREFIX) ? Buffer.from(capability.slice(PREFIX.length), 'base64url') : Buffer.alloc(0);
    const expected = this.mac(id);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw denied(id, 'capability: does not match the object (it is another object’s, or was made up)');
    }
  }

  private mac(id: string): Buffer {
    return createHmac('sha256', this.key as Buffer)
      .update(id, 'utf8')
      .digest();
  }
}

function denied(id: string, message: string): DiffmeshError {
  return new DiffmeshError(Code.PERMISSION_DENIED, 'CAPABILITY_REQUIRED', `object ${id}: ${message}`, {
    metadata: { field: 'capability', object_id: id },
  });
}
