import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, Code } from '@diffmesh/core';
import { MemoryTensorStore } from './memory-store.js';
import { checksumOf, float32View, tensorView, toBytes } from './tensor-bytes.js';
import { createTensorStore } from './factory.js';
import { type PutTensorInput, type TensorStore } from './tensor-store.js';
import { rejection } from '@diffmesh/testing';

const stores: TensorStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

function store(opts: { capacityBytes?: number; defaultTtlMs?: number; now?: () => number } = {}): TensorStore {
  const s = createTensorStore(
    { backend: 'memory', capacityBytes: opts.capacityBytes ?? 1 << 20, defaultTtlMs: opts.defaultTtlMs ?? 60_000, sweepIntervalMs: 0 },
    { nodeId: 'node-a', now: opts.now },
  );
  stores.push(s);
  return s;
}

function latents(requestId = 'req1', values: number[] = [0.5, -1, 2, 3.25, 4, 5]): PutTensorInput {
  return { requestId, name: 'latents', data: toBytes(Float32Array.from(values)), shape: [1, 2, 3], dtype: 'float32' };
}

describe('put / get', () => {
  it('round-trips bytes, shape and dtype and fills the ref', async () => {
    const s = store({ now: () => 1234 });
    const ref = await s.put(latents(), { ttlMs: 5000 });
    expect(ref).toMatchObject({
      ownerAddress: '',
      ownerNodeId: 'node-a',
      shape: [1, 2, 3],
      dtype: 'float32',
      sizeBytes: 24,
      createdAt: 1234,
      name: 'latents',
      ttlMs: 5000,
    });
    expect(ref.objectId).toMatch(/^req1:latents:[0-9a-f]{12}$/);
    expect(ref.checksum).toMatch(/^crc32c:[0-9a-f]{8}$/);

    const byId = await s.get(ref.objectId);
    expect(Array.from(float32View(byId.data))).toEqual([0.5, -1, 2, 3.25, 4, 5]);
    expect(byId.ref).toEqual(ref);
    expect((await s.get(ref)).ref.objectId).toBe(ref.objectId);
    expect((await s.stat(ref)).ref).toEqual(ref);
  });

  it('gives each put its own id', async () => {
    const s = store();
    const a = await s.put(latents());
    const b = await s.put(latents());
    expect(a.objectId).not.toBe(b.objectId);
    expect(await s.usage()).toMatchObject({ objects: 2, bytes: 48 });
  });

  it('rejects data whose size does not match shape and dtype, and bad names', async () => {
    const s = store();
    const err = await rejection(s.put({ ...latents(), shape: [2, 2] }));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.field).toBe('data');
    expect(err.message).toContain('24 bytes do not match shape [2, 2] of float32 (16 bytes)');
    expect((await rejection(s.put({ ...latents(), name: 'a:b' }))).field).toBe('name');
    expect((await rejection(s.put({ ...latents(), requestId: '' }))).field).toBe('request_id');
    expect((await rejection(s.put(latents(), { ttlMs: -5 }))).field).toBe('ttl_ms');
  });
});

describe('checksums', () => {
  it('match the CRC-32C check value', () => {
    expect(checksumOf(new TextEncoder().encode('123456789'))).toBe('crc32c:e3069283');
    expect(checksumOf(new Uint8Array(0))).toBe('crc32c:00000000');
  });

  it('detect bytes corrupted after put', async () => {
    const s = store();
    const input = latents();
    const ref = await s.put(input);
    input.data[3] ^= 0x40;
    const err = await rejection(s.get(ref));
    expect(err.code).toBe(Code.DATA_LOSS);
    expect(err.reason).toBe('CHECKSUM_MISMATCH');
    expect(err.message).toContain(ref.objectId);
  });

  it('detect a ref whose checksum is not the stored one', async () => {
    const s = store();
    const ref = await s.put(latents());
    expect((await rejection(s.get({ ...ref, checksum: 'crc32c:00000000' }))).reason).toBe('CHECKSUM_MISMATCH');
  });
});

describe('TTL', () => {
  it('expires objects when their TTL passes, then reports them as expired', async () => {
    let t = 0;
    const s = store({ now: () => t, defaultTtlMs: 1000 });
    const ref = await s.put(latents());
    t = 999;
    await expect(s.get(ref)).resolves.toBeDefined();
    t = 1000;
    const err = await rejection(s.get(ref));
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.reason).toBe('OBJECT_EXPIRED');
    expect((await rejection(s.stat(ref))).reason).toBe('OBJECT_EXPIRED');
    expect((await s.usage()).bytes).toBe(0);
  });

  it('drops expired objects on sweep and frees their bytes', async () => {
    let t = 0;
    const s = new MemoryTensorStore({ capacityBytes: 1000, defaultTtlMs: 100, sweepIntervalMs: 0, now: () => t });
    stores.push(s);
    const short = await s.put(latents('a'));
    const long = await s.put(latents('b'), { ttlMs: 10_000 });
    t = 100;
    expect(s.sweep()).toBe(1);
    expect(await s.usage()).toMatchObject({ objects: 1, bytes: 24 });
    expect((await rejection(s.get(short))).reason).toBe('OBJECT_EXPIRED');
    await expect(s.get(long)).resolves.toBeDefined();
  });

  it('touch restarts the TTL, optionally with a new one', async () => {
    let t = 0;
    const s = store({ now: () => t, defaultTtlMs: 1000 });
    const ref = await s.put(latents());
    t = 900;
    expect((await s.touch(ref)).expiresAt).toBe(1900);
    t = 1500;
    await expect(s.get(ref)).resolves.toBeDefined();
    const info = await s.touch(ref.objectId, 5000);
    expect(info).toMatchObject({ expiresAt: 6500, ref: { ttlMs: 5000 } });
    t = 6499;
    await expect(s.get(ref)).resolves.toBeDefined();
    t = 6500;
    expect((await rejection(s.touch(ref))).reason).toBe('OBJECT_EXPIRED');
  });

  it('reports unknown ids as not found', async () => {
    const s = store();
    const err = await rejection(s.get('req:x:000000000000'));
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.reason).toBe('OBJECT_NOT_FOUND');
  });
});

describe('delete', () => {
  it('deletes one object idempotently', async () => {
    const s = store();
    const ref = await s.put(latents());
    expect(await s.delete(ref)).toBe(true);
    expect(await s.delete(ref.objectId)).toBe(false);
    expect((await rejection(s.get(ref))).reason).toBe('OBJECT_NOT_FOUND');
  });

  it('deletes every object of a request and nothing else', async () => {
    const s = store();
    const a1 = await s.put(latents('A'));
    const a2 = await s.put({ ...latents('A'), name: 'prompt_embeds' });
    const b = await s.put(latents('B'));
    expect(await s.deleteRequest('A')).toBe(2);
    expect(await s.deleteRequest('A')).toBe(0);
    for (const r of [a1, a2]) expect((await rejection(s.get(r))).reason).toBe('OBJECT_NOT_FOUND');
    await expect(s.get(b)).resolves.toBeDefined();
    expect(await s.usage()).toMatchObject({ objects: 1, bytes: 24 });
  });
});

describe('capacity', () => {
  it('refuses a put beyond capacity with STORE_FULL, and accepts again once space frees', async () => {
    const s = store({ capacityBytes: 60 });
    const first = await s.put(latents('r1'));
    await s.put(latents('r2'));
    const err = await rejection(s.put(latents('r3')));
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.reason).toBe('STORE_FULL');
    expect(err.retryAfterMs).toBe(1000);
    expect(err.message).toBe('tensor store full: cannot hold "latents" (24 B) for request r3; 48 B of 60 B in use by 2 objects');
    await s.delete(first);
    await expect(s.put(latents('r3'))).resolves.toBeDefined();
  });

  it('makes room by dropping expired objects first', async () => {
    let t = 0;
    const s = store({ capacityBytes: 48, defaultTtlMs: 10, now: () => t });
    await s.put(latents('old'));
    await s.put(latents('old'));
    t = 10;
    await expect(s.put(latents('new'))).resolves.toBeDefined();
  });

  it('says when an object can never fit', async () => {
    const s = store({ capacityBytes: 16 });
    const err = await rejection(s.put(latents()));
    expect(err.reason).toBe('STORE_FULL');
    expect(err.retryAfterMs).toBeUndefined();
    expect(err.message).toContain('larger than its whole capacity of 16 B');
  });
});

describe('lifecycle and factory', () => {
  it('refuses calls after close', async () => {
    const s = store();
    await s.close();
    await s.close();
    const err = await rejection(s.put(latents()));
    expect(err.code).toBe(Code.UNAVAILABLE);
  });

  it('rejects an unknown backend', () => {
    expect(() => createTensorStore({ backend: 'disk' as never })).toThrow(ConfigError);
    expect(() => createTensorStore({ backend: 'disk' as never })).toThrow(
      'unknown tensor store backend "disk" (available: memory, redis, s3)',
    );
  });

  it('needs a location for the redis and s3 backends, and never shows its credentials', () => {
    expect(() => createTensorStore({ backend: 'redis' })).toThrow('is required (redis://host:6379/0), or set REDIS_URL');
    expect(() => createTensorStore({ backend: 's3', location: 'redis://u:secret@h:1/0' })).toThrow(
      'redis://***@h:1/0 is not a s3 location',
    );
    expect(() => createTensorStore({ backend: 'redis', location: 'redis://:secret@host:xx/0' })).not.toThrow(/secret/);
  });

  it('sweeps in the background on its interval', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      let t = 0;
      const s = createTensorStore({ sweepIntervalMs: 5000, defaultTtlMs: 1000 }, { now: () => t });
      stores.push(s);
      await s.put(latents());
      t = 1000;
      expect((await s.usage()).objects).toBe(1);
      vi.advanceTimersByTime(5000);
      expect((await s.usage()).objects).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('does not let the sweep timer hold the process open', async () => {
    const spy = vi.spyOn(globalThis, 'setInterval');
    try {
      stores.push(createTensorStore({ sweepIntervalMs: 60_000 }));
      const timer = spy.mock.results[0]?.value as NodeJS.Timeout;
      expect(timer.hasRef()).toBe(false);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('byte views', () => {
  it('views aligned bytes without copying and copies unaligned ones', () => {
    const f = Float32Array.from([1, 2, 3]);
    const bytes = toBytes(f);
    expect(bytes.buffer).toBe(f.buffer);
    const view = float32View(bytes);
    expect(view.buffer).toBe(f.buffer);
    view[0] = 9;
    expect(f[0]).toBe(9);

    const padded = new Uint8Array(13);
    padded.set(bytes, 1);
    const unaligned = float32View(padded.subarray(1));
    expect(Array.from(unaligned)).toEqual([9, 2, 3]);
    expect(unaligned.buffer).not.toBe(padded.buffer);
    expect(() => float32View(new Uint8Array(5))).toThrow(/not a whole number of float32/);
  });

  it('views each dtype', () => {
    expect(Array.from(tensorView(toBytes(BigInt64Array.from([5n, -1n])), 'int64'))).toEqual([5n, -1n]);
    expect(Array.from(tensorView(toBytes(Int32Array.from([7, -7])), 'int32'))).toEqual([7, -7]);
    expect(tensorView(toBytes(Uint16Array.from([0x3c00])), 'float16')[0]).toBe(0x3c00);
  });
});
