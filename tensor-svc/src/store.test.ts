import { pbkdf2 } from 'node:crypto';
import { existsSync, lstatSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { checksumOf, objectPath } from '@diffmesh/tensor-client';
import { silentLogger } from '@diffmesh/core';
import type { ObjectHeader } from './object-header.js';
import { TieredStore, type TieredStoreOptions } from './store.js';

// Makes the next symlink() of the store fail, as a full or broken shared-memory directory would.
const symlinkFault = vi.hoisted(() => ({ next: false }));
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  return {
    ...fs,
    symlink: (...args: Parameters<typeof fs.symlink>) => {
      if (!symlinkFault.next) return fs.symlink(...args);
      symlinkFault.next = false;
      return Promise.reject(Object.assign(new Error('EIO: i/o error, symlink'), { code: 'EIO' }));
    },
  };
});

const log = silentLogger();
let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-tensor-store-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});
const stores: TieredStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

let seq = 0;
let t = 1_000_000;
async function store(extra: Partial<TieredStoreOptions> = {}): Promise<TieredStore> {
  seq += 1;
  const s = await TieredStore.open({
    shmDir: path.join(root, `shm-${seq}`),
    spillDir: path.join(root, `spill-${seq}`),
    memoryCapacityBytes: 1 << 20,
    spillThresholdBytes: 1 << 20,
    diskCapacityBytes: 1 << 20,
    defaultTtlMs: 1000,
    sweepIntervalMs: 0,
    retryAfterMs: 100,
    log,
    now: () => t,
    ...extra,
  });
  stores.push(s);
  return s;
}

const header = (id: string, size: number): ObjectHeader => ({
  objectId: id,
  name: 'x',
  shape: [size],
  dtype: 'uint8',
  sizeBytes: size,
  ttlMs: 0,
  checksum: '',
});

/**
 * Keeps every thread of libuv's pool busy for a while, as the file reads and writes of other
 * streams do on a loaded node: asynchronous file calls queue behind it, synchronous ones do not.
 */
function busyThreadPool(): Promise<unknown> {
  const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  return Promise.all(Array.from({ length: threads }, () => new Promise((resolve) => pbkdf2('x', 'y', 300_000, 32, 'sha256', resolve))));
}

/** The bytes of an object, and whether they match the ref its reader gave. */
async function read(s: TieredStore, id: string): Promise<{ bytes: number[]; matchesRef: boolean }> {
  const reader = await s.openRead(id);
  try {
    const buf = Buffer.alloc(reader.ref.sizeBytes);
    await reader.readExactly(buf, buf.byteLength, 0);
    return { bytes: [...new Set(buf)], matchesRef: checksumOf(buf) === reader.ref.checksum };
  } finally {
    await reader.close();
  }
}

describe('a put of an id whose previous version is being removed', () => {
  it('keeps its file when the old version expired just before (PutObjects, synchronous rename)', async () => {
    const s = await store();
    await s.putWhole(header('r:x:1', 100), new Uint8Array(100).fill(1));
    t += 5000;
    const busy = busyThreadPool();
    expect(() => s.stat('r:x:1')).toThrow(/expired/); // the old file is removed in the background
    const ref = await s.putWhole(header('r:x:1', 100), new Uint8Array(100).fill(2));
    await busy;
    expect(s.stat('r:x:1').ref.checksum).toBe(ref.checksum);
    expect(existsSync(objectPath(s.shmDir, 'r:x:1'))).toBe(true);
    expect(await read(s, 'r:x:1')).toEqual({ bytes: [2], matchesRef: true });
    expect(s.usage().memory).toMatchObject({ objects: 1, bytes: 100, reservedBytes: 0 });
  });

  it('keeps its file when a delete of the old version is in flight', async () => {
    const s = await store();
    await s.putWhole(header('r:y:1', 100), new Uint8Array(100).fill(1));
    const busy = busyThreadPool();
    const deleting = s.delete('r:y:1');
    await s.putWhole(header('r:y:1', 100), new Uint8Array(100).fill(2));
    expect(await deleting).toBe(true);
    await busy;
    expect(await read(s, 'r:y:1')).toEqual({ bytes: [2], matchesRef: true });
  });

  it('keeps its file when the old version was on disk', async () => {
    const s = await store({ spillThresholdBytes: 0 });
    await s.putWhole(header('r:z:1', 100), new Uint8Array(100).fill(1));
    await s.putWhole(header('r:filler:1', (1 << 20) - 100), new Uint8Array((1 << 20) - 100)); // the disk is full
    expect(s.stat('r:z:1').tier).toBe('disk');
    const busy = busyThreadPool();
    const deleting = s.delete('r:z:1');
    // Too large for what the delete frees on disk: goes to memory, renamed into place at once.
    await s.putWhole(header('r:z:1', 200), new Uint8Array(200).fill(2));
    await deleting;
    await busy;
    expect(s.stat('r:z:1').tier).toBe('memory');
    expect(await read(s, 'r:z:1')).toEqual({ bytes: [2], matchesRef: true });
  });
});

describe('replacing an object', () => {
  it('a reader opening it meanwhile gets bytes that match the ref it is given', async () => {
    const s = await store();
    await s.putWhole(header('r:a:1', 100), new Uint8Array(100).fill(1));
    const busy = busyThreadPool();
    const opening = s.openRead('r:a:1'); // its open() waits for the pool
    await s.putWhole(header('r:a:1', 200), new Uint8Array(200).fill(2)); // renamed into place at once
    await busy;
    const reader = await opening;
    const buf = Buffer.alloc(reader.ref.sizeBytes);
    await reader.readExactly(buf, buf.byteLength, 0);
    await reader.close();
    expect(checksumOf(buf)).toBe(reader.ref.checksum);
    expect([...new Set(buf)]).toEqual([2]);
  });

  it('a touch racing the replacement leaves the new file stamped with the new expiry', async () => {
    const s = await store();
    await s.putWhole(header('r:b:1', 100), new Uint8Array(100).fill(1));
    const busy = busyThreadPool();
    const touching = s.touch('r:b:1', 60_000);
    await s.putWhole(header('r:b:1', 100), new Uint8Array(100).fill(2));
    await touching;
    await busy;
    const info = s.stat('r:b:1');
    expect(info.expiresAt).toBe(t + 1000);
    expect(lstatSync(objectPath(s.shmDir, 'r:b:1')).mtimeMs).toBe(info.expiresAt);
  });

  it('on disk, a replacement that fails to link leaves the previous version whole', async () => {
    const s = await store({ spillThresholdBytes: 0 });
    const old = await s.putWhole(header('r:c:1', 100), new Uint8Array(100).fill(1));
    symlinkFault.next = true;
    await expect(s.putWhole(header('r:c:1', 100), new Uint8Array(100).fill(2))).rejects.toThrow(/EIO/);
    expect(s.stat('r:c:1').ref.checksum).toBe(old.checksum);
    expect(await read(s, 'r:c:1')).toEqual({ bytes: [1], matchesRef: true });
    expect(s.usage().disk).toMatchObject({ objects: 1, bytes: 100, reservedBytes: 0 });
    // The failed version left no file behind.
    const spill = s.usage().disk.dir;
    expect(readdirSync(spill).filter((n) => !n.startsWith('.'))).toHaveLength(1);
  });

  it('on disk, readers of the replaced version finish reading it', async () => {
    const s = await store({ spillThresholdBytes: 0 });
    await s.putWhole(header('r:d:1', 100), new Uint8Array(100).fill(1));
    const reader = await s.openRead('r:d:1');
    await s.putWhole(header('r:d:1', 100), new Uint8Array(100).fill(2));
    const buf = Buffer.alloc(100);
    await reader.readExactly(buf, 100, 0);
    await reader.close();
    expect(checksumOf(buf)).toBe(reader.ref.checksum);
    expect(await read(s, 'r:d:1')).toEqual({ bytes: [2], matchesRef: true });
    expect(s.usage().disk).toMatchObject({ objects: 1, bytes: 100 });
  });
});
