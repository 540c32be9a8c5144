import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdtemp, open, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadDiffmeshProtos, type PutRequest, type TensorServiceClient as RawClient } from '@diffmesh/protos';
import { Code, ConfigError, DiffmeshError, channelOptions, fromWire, silentLogger, type ObjectRef } from '@diffmesh/core';
import {
  INCOMING_DIR,
  RemoteTensorStore,
  TensorServiceClient,
  checksumOf,
  incomingPath,
  objectPath,
  toBytes,
} from '@diffmesh/tensor-client';
import { loadTensorSvcConfig, resolveTensorSvcConfig, type TensorSvcConfigInput } from './config.js';
import { startTensorService, type RunningTensorService } from './server.js';
import { ObjectCapabilities } from './capabilities.js';
import { TensorServiceImpl } from './service.js';
import { INCOMING_ABANDONED_MS } from './store-directories.js';
import type { TieredStore } from './store.js';
import { rejection } from '@diffmesh/testing';

const MiB = 1024 * 1024;
const log = silentLogger();

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-tensor-test-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const running: { stop(): Promise<void> }[] = [];
const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  for (const r of running.splice(0)) await r.stop();
});

let seq = 0;
/** A tensor-svc on 127.0.0.1:0 with its own directories (not /dev/shm: tests must not leak RAM). */
async function service(cfg: TensorSvcConfigInput = {}, now?: () => number): Promise<RunningTensorService> {
  seq += 1;
  const svc = await startTensorService(
    {
      nodeId: `node-${seq}`,
      shmDir: path.join(root, `shm-${seq}`),
      spillDir: path.join(root, `spill-${seq}`),
      sweepIntervalMs: 0,
      drainGraceMs: 1000,
      // These tests are about storage and streaming and call by bare id; the capability
      // tests below turn capabilities on.
      capabilities: false,
      ...cfg,
    },
    log,
    now ? { now } : {},
  );
  running.push({ stop: () => svc.stop(0) });
  return svc;
}

function client(svc: RunningTensorService, opts: ConstructorParameters<typeof TensorServiceClient>[1] = {}): TensorServiceClient {
  const c = new TensorServiceClient(svc.address, opts);
  closers.push(() => c.close());
  return c;
}

/**
 * A store client on node `nodeId`: on another node than the service by default, so every
 * transfer goes over gRPC; on the service's node, it shares its shared-memory directory.
 */
function remoteStore(
  svc: RunningTensorService,
  nodeId = 'elsewhere',
  extra: Partial<ConstructorParameters<typeof RemoteTensorStore>[0]> = {},
): RemoteTensorStore {
  const shmDir = nodeId === svc.nodeId ? svc.shmDir : path.join(root, `no-shm-on-${nodeId}`);
  const s = new RemoteTensorStore({ address: svc.address, nodeId, shmDir, chunkBytes: MiB, ...extra });
  closers.push(() => s.close());
  return s;
}

function floats(n: number, seed = 1): Uint8Array {
  const f = new Float32Array(n);
  for (let i = 0; i < n; i++) f[i] = Math.sin(i * 0.001 + seed);
  return toBytes(f);
}

describe('Put and Get', () => {
  it('round-trips a 10 MiB tensor in several chunks each way', async () => {
    const svc = await service({ chunkBytes: MiB });
    const store = remoteStore(svc);
    const data = floats((10 * MiB) / 4);
    const ref = await store.put({ requestId: 'req1', name: 'latents', data, shape: [10, MiB / 4], dtype: 'float32' }, { ttlMs: 60_000 });
    expect(ref).toMatchObject({
      ownerAddress: svc.address,
      ownerNodeId: svc.nodeId,
      shape: [10, MiB / 4],
      dtype: 'float32',
      sizeBytes: 10 * MiB,
      name: 'latents',
      ttlMs: 60_000,
      checksum: checksumOf(data),
    });
    expect(ref.objectId).toMatch(/^req1:latents:[0-9a-f]{12}$/);

    const got = await store.get(ref);
    expect(got.data.byteLength).toBe(10 * MiB);
    expect(Buffer.compare(Buffer.from(got.data.buffer, got.data.byteOffset, got.data.byteLength), Buffer.from(data))).toBe(0);
    expect(got.ref).toEqual(ref);
    expect(store.stats()).toMatchObject({ puts: 1, remoteReads: 1, shmReads: 0 });
    const m = svc.metrics.snapshot();
    expect(m.putBytes).toBe(10 * MiB);
    expect(m.getBytes).toBe(10 * MiB);
    expect(m.calls.Get).toBe(1);
  });

  it('reads a range by offset and length, and to the end with length 0', async () => {
    const svc = await service({ chunkBytes: MiB });
    const c = client(svc, { chunkBytes: MiB });
    const data = new Uint8Array(3 * MiB + 123).map((_, i) => (i * 7) & 0xff);
    const ref = await c.put({ name: 'bytes', shape: [data.byteLength], dtype: 'uint8' }, data);
    expect(ref.objectId).toMatch(/^anon:bytes:[0-9a-f]{12}$/);

    const mid = await c.get(ref.objectId, { offset: MiB - 5, length: MiB + 10 });
    expect(mid.offset).toBe(MiB - 5);
    expect(Buffer.from(mid.data).equals(Buffer.from(data.subarray(MiB - 5, 2 * MiB + 5)))).toBe(true);

    const tail = await c.get(ref.objectId, { offset: 3 * MiB });
    expect(Buffer.from(tail.data).equals(Buffer.from(data.subarray(3 * MiB)))).toBe(true);

    const into = new Uint8Array(16);
    const small = await c.get(ref.objectId, { offset: 10, length: 16, into });
    expect(small.data.buffer).toBe(into.buffer);
    expect(Array.from(small.data)).toEqual(Array.from(data.subarray(10, 26)));

    const empty = await c.get(ref.objectId, { offset: data.byteLength });
    expect(empty.data.byteLength).toBe(0);

    const past = await rejection(c.get(ref.objectId, { offset: 10, length: data.byteLength }));
    expect(past.code).toBe(Code.INVALID_ARGUMENT);
    expect(past.field).toBe('length');
    expect((await rejection(c.get(ref.objectId, { offset: data.byteLength + 1 }))).field).toBe('offset');
  });

  it('stores empty tensors', async () => {
    const svc = await service();
    const c = client(svc);
    const ref = await c.put({ name: 'nothing', shape: [0, 4], dtype: 'float32' }, new Uint8Array(0));
    expect(ref.sizeBytes).toBe(0);
    expect((await c.get(ref.objectId)).data.byteLength).toBe(0);
  });

  it('replaces an object put again under the same id', async () => {
    const svc = await service();
    const c = client(svc);
    const a = await c.put({ objectId: 'r:x:1', name: 'x', shape: [4], dtype: 'uint8' }, Uint8Array.of(1, 2, 3, 4));
    const b = await c.put({ objectId: 'r:x:1', name: 'x', shape: [2], dtype: 'uint8' }, Uint8Array.of(9, 9));
    expect(b.objectId).toBe(a.objectId);
    expect(Array.from((await c.get('r:x:1')).data)).toEqual([9, 9]);
    expect(svc.store.usage().memory).toMatchObject({ objects: 1, bytes: 2 });
  });
});

describe('PutObjects (small objects on one long-lived stream)', () => {
  it('stores many objects on one stream, each answered with its own ref, concurrently sent', async () => {
    const svc = await service();
    const c = client(svc);
    const datas = Array.from({ length: 12 }, (_, i) => floats(1000 + i * 37, i));
    const refs = await Promise.all(
      datas.map((d, i) => c.putObject({ objectId: `r:obj:${i}`, name: 'obj', shape: [d.byteLength / 4], dtype: 'float32' }, d)),
    );
    expect(refs.map((r) => r.objectId)).toEqual(datas.map((_, i) => `r:obj:${i}`));
    for (const [i, ref] of refs.entries()) {
      expect(ref.sizeBytes).toBe(datas[i].byteLength);
      expect(ref.ownerAddress).toBe(svc.address);
      expect(Buffer.from((await c.get(ref.objectId)).data).equals(Buffer.from(datas[i]))).toBe(true);
    }
  });

  it('answers a bad object with its error (naming the field) and goes on with the next ones', async () => {
    const svc = await service();
    const c = client(svc);
    const bad = await rejection(c.putObject({ name: 'x:y', shape: [2], dtype: 'uint8' }, Uint8Array.of(1, 2)));
    expect(bad).toMatchObject({ code: Code.INVALID_ARGUMENT, reason: 'INVALID_PARAMETER', field: 'header.name' });
    const wrongSize = await rejection(c.putObject({ name: 'x', shape: [3], dtype: 'uint8' }, Uint8Array.of(1, 2)));
    expect(wrongSize.field).toBe('header.size_bytes');
    const corrupt = await rejection(
      c.putObject({ name: 'x', shape: [2], dtype: 'uint8', checksum: 'crc32c:00000000' }, Uint8Array.of(1, 2)),
    );
    expect(corrupt.reason).toBe('CHECKSUM_MISMATCH');
    const ok = await c.putObject({ name: 'x', shape: [2], dtype: 'uint8' }, Uint8Array.of(7, 8));
    expect(Array.from((await c.get(ok.objectId)).data)).toEqual([7, 8]);
    // Nothing half-stored was left behind by the failures.
    expect(svc.store.usage().memory).toMatchObject({ objects: 1, bytes: 2 });
  });

  it('stores objects in shared memory, then past the spill threshold on disk, leaving no temporary files', async () => {
    const svc = await service({ memoryCapacityBytes: 4096, spillThresholdBytes: 2048, diskCapacityBytes: 4096 });
    const c = client(svc);
    const put = (i: number) =>
      c.putObject({ objectId: `r:o:${i}`, name: 'o', shape: [1024], dtype: 'uint8' }, new Uint8Array(1024).fill(i));
    const refs = [await put(1), await put(2), await put(3)];
    expect(svc.store.usage().memory).toMatchObject({ objects: 2, bytes: 2048, reservedBytes: 0 });
    expect(svc.store.usage().disk).toMatchObject({ objects: 1, bytes: 1024, reservedBytes: 0 });
    expect(lstatSync(objectPath(svc.shmDir, refs[0].objectId)).isFile()).toBe(true);
    expect(lstatSync(objectPath(svc.shmDir, refs[2].objectId)).isSymbolicLink()).toBe(true);
    // The file's mtime is the expiry, as same-node readers expect.
    const expiry = lstatSync(objectPath(svc.shmDir, refs[0].objectId)).mtimeMs;
    expect(Math.abs(expiry - (refs[0].createdAt + refs[0].ttlMs))).toBeLessThan(1000);
    // Putting an id again replaces the object; memory is at the threshold, so the new one goes to disk.
    await c.putObject({ objectId: 'r:o:1', name: 'o', shape: [1024], dtype: 'uint8' }, new Uint8Array(1024).fill(9));
    expect(Array.from((await c.get('r:o:1')).data.subarray(0, 2))).toEqual([9, 9]);
    expect(svc.store.usage().memory).toMatchObject({ objects: 1, bytes: 1024, reservedBytes: 0 });
    expect(svc.store.usage().disk).toMatchObject({ objects: 2, bytes: 2048, reservedBytes: 0 });
    for (const dir of [svc.shmDir, svc.config.spillDir]) expect(readdirSync(dir).filter((n) => n.startsWith('.part-'))).toEqual([]);
  });

  it('fails the objects waiting on a stream that breaks with UNAVAILABLE, and reopens it for the next', async () => {
    const first = await service();
    const c = new TensorServiceClient(first.address);
    closers.push(() => c.close());
    await c.putObject({ name: 'a', shape: [1], dtype: 'uint8' }, Uint8Array.of(1));
    await first.stop(0);
    const err = await rejection(c.putObject({ name: 'b', shape: [1], dtype: 'uint8' }, Uint8Array.of(2)));
    expect(err.code).toBe(Code.UNAVAILABLE);
  });

  it('ends open streams on a graceful stop, so the drain does not wait out its grace', async () => {
    // A minute of grace, which a stop kept waiting by the idle stream would use up (grpc-js
    // gives up on it after 30 s); a drain that ends the stream is done at once. A liveness
    // bound, not a timing: 10 s for what takes milliseconds.
    const svc = await service({ drainGraceMs: 60_000 });
    const c = new TensorServiceClient(svc.address);
    closers.push(() => c.close());
    await c.putObject({ name: 'a', shape: [1], dtype: 'uint8' }, Uint8Array.of(1));
    const outcome = await Promise.race([
      svc.stop().then(() => 'stopped'),
      new Promise((resolve) => setTimeout(() => resolve('still draining after 10 s'), 10_000).unref()),
    ]);
    expect(outcome).toBe('stopped');
    // The client sees the stream end and tries to reopen it: the stopped service is unavailable.
    expect((await rejection(c.putObject({ name: 'b', shape: [1], dtype: 'uint8' }, Uint8Array.of(2)))).code).toBe(Code.UNAVAILABLE);
  });

  it('stops reading a stream while the objects it received wait for a slow store, up to maxStreamBufferedBytes', async () => {
    // Counts the objects the service takes off its PutObjects streams and those it answers.
    let received = 0;
    let answered = 0;
    let peak = 0;
    type Call = grpc.ServerDuplexStream<unknown, unknown>;
    const proto = TensorServiceImpl.prototype as unknown as { putObjects(call: Call): void };
    const putObjects = proto.putObjects;
    closers.push(() => (proto.putObjects = putObjects));
    proto.putObjects = function (this: unknown, call: Call) {
      call.on('data', () => {
        received += 1;
        peak = Math.max(peak, received - answered);
      });
      const write = call.write.bind(call) as (...args: unknown[]) => boolean;
      call.write = ((...args: unknown[]) => {
        answered += 1;
        return write(...args);
      }) as Call['write'];
      putObjects.call(this, call);
    };
    const budget = 2 * MiB;
    const size = MiB / 2;
    const svc = await service({ chunkBytes: MiB, maxStreamBufferedBytes: budget });
    // A store that does not finish a put until released (a busy spill disk).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    closers.push(() => release()); // also when the test fails
    const putWhole = svc.store.putWhole.bind(svc.store);
    svc.store.putWhole = async (h, d) => {
      await gate;
      return putWhole(h, d);
    };
    const c = client(svc);
    const n = 40;
    const puts = Array.from({ length: n }, (_, i) =>
      c.putObject({ objectId: `r:o:${i}`, name: 'o', shape: [size], dtype: 'uint8' }, new Uint8Array(size).fill(i)),
    );
    for (const p of puts) p.catch(() => undefined); // awaited below; the stream may close first when the test fails
    // The service holds objects until they reach its budget, then stops reading (it would
    // otherwise take all 40 off the wire while the store is stuck).
    const bound = budget / size + 1;
    await expect.poll(() => received > bound || svc.metrics.snapshot().streamBufferedBytes >= budget, { timeout: 20_000 }).toBe(true);
    expect(received).toBeLessThanOrEqual(bound);
    expect(svc.metrics.snapshot().streamBufferedBytes).toBe(received * size);
    release();
    const refs = await Promise.all(puts);
    expect(refs.map((r) => r.objectId)).toEqual(Array.from({ length: n }, (_, i) => `r:o:${i}`));
    expect(peak).toBeLessThanOrEqual(bound);
    expect(svc.metrics.snapshot().streamBufferedBytes).toBe(0);
    expect(Array.from((await c.get('r:o:39')).data.subarray(0, 2))).toEqual([39, 39]);
  });

  it('is what RemoteTensorStore uses for objects up to streamPutMaxBytes, and a chunked Put above', async () => {
    const svc = await service();
    const store = remoteStore(svc, 'elsewhere', { streamPutMaxBytes: 1024 });
    const small = await store.put({ requestId: 'r1', name: 'small', data: floats(256), shape: [256], dtype: 'float32' });
    const large = await store.put({ requestId: 'r1', name: 'large', data: floats(4096), shape: [4096], dtype: 'float32' });
    expect(Buffer.from((await store.get(small)).data).equals(Buffer.from(floats(256)))).toBe(true);
    expect(Buffer.from((await store.get(large)).data).equals(Buffer.from(floats(4096)))).toBe(true);
    expect(svc.metrics.snapshot().calls.Put).toBe(2);
  });
});

describe('checksums', () => {
  it('detects stored bytes corrupted after the put, over gRPC and from shared memory', async () => {
    const svc = await service({ chunkBytes: MiB });
    const store = remoteStore(svc);
    const data = floats(MiB); // 4 MiB
    const ref = await store.put({ requestId: 'r', name: 'latents', data, shape: [MiB], dtype: 'float32' });

    const file = objectPath(svc.shmDir, ref.objectId);
    const fh = await open(file, 'r+');
    await fh.write(Uint8Array.of(0x5a), 0, 1, 3 * MiB + 17);
    await fh.close();
    // Writing moved the mtime (the expiry same-node readers check) to now; put it back.
    await utimes(file, new Date(), new Date(Date.now() + 600_000));

    const err = await rejection(store.get(ref));
    expect(err.code).toBe(Code.DATA_LOSS);
    expect(err.reason).toBe('CHECKSUM_MISMATCH');
    expect(err.message).toContain(ref.objectId);
    // A ranged read that does not include the bad byte still verifies the whole object.
    const c = client(svc);
    expect((await rejection(c.get(ref.objectId, { offset: 0, length: 1024 }))).reason).toBe('CHECKSUM_MISMATCH');

    const sameNode = remoteStore(svc, svc.nodeId);
    const shmErr = await rejection(sameNode.get(ref));
    expect(shmErr.code).toBe(Code.DATA_LOSS);
    expect(shmErr.message).toContain('shared memory');
  });

  it('rejects a Put whose bytes do not match the header checksum', async () => {
    const svc = await service();
    const c = client(svc);
    const err = await rejection(c.put({ name: 'x', shape: [4], dtype: 'uint8', checksum: 'crc32c:00000000' }, Uint8Array.of(1, 2, 3, 4)));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.field).toBe('header.checksum');
    expect(svc.store.usage().memory).toMatchObject({ objects: 0, bytes: 0, reservedBytes: 0 });
  });

  it('refuses a ref whose checksum names another version of the object', async () => {
    const svc = await service();
    const store = remoteStore(svc);
    const ref = await store.put({ requestId: 'r', name: 'x', data: Uint8Array.of(1, 2), shape: [2], dtype: 'uint8' });
    const err = await rejection(store.get({ ...ref, checksum: 'crc32c:12345678' }));
    expect(err.reason).toBe('CHECKSUM_MISMATCH');
  });
});

describe('TTL, Stat, Touch, Delete', () => {
  it('expires objects through the service and deletes their files', async () => {
    let t = 1_000_000;
    const svc = await service({ defaultTtlMs: 1000 }, () => t);
    const c = client(svc);
    const ref = await c.put({ name: 'x', shape: [8], dtype: 'uint8' }, new Uint8Array(8));
    expect(await c.stat(ref.objectId)).toMatchObject({ expiresAt: 1_001_000, ref: { ttlMs: 1000, createdAt: 1_000_000 } });
    const file = objectPath(svc.shmDir, ref.objectId);
    expect(existsSync(file)).toBe(true);

    t = 1_000_999;
    await expect(c.get(ref.objectId)).resolves.toBeDefined();
    t = 1_001_000;
    const err = await rejection(c.get(ref.objectId));
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.reason).toBe('OBJECT_EXPIRED');
    expect((await rejection(c.stat(ref.objectId))).reason).toBe('OBJECT_EXPIRED');
    expect((await rejection(c.touch(ref.objectId))).reason).toBe('OBJECT_EXPIRED');
    await svc.store.sweep();
    expect(existsSync(file)).toBe(false);
    expect(svc.store.usage().memory.bytes).toBe(0);
  });

  it('deletes expired objects on sweep', async () => {
    let t = 0;
    const svc = await service({ defaultTtlMs: 1000 }, () => t);
    const c = client(svc);
    const ref = await c.put({ name: 'x', shape: [8], dtype: 'uint8' }, new Uint8Array(8));
    t = 5000;
    expect(await svc.store.sweep()).toBe(1);
    expect(existsSync(objectPath(svc.shmDir, ref.objectId))).toBe(false);
    expect((await rejection(c.stat(ref.objectId))).reason).toBe('OBJECT_EXPIRED');
  });

  it('sweeps expired objects in the background on its interval', async () => {
    let t = 0;
    const svc = await service({ defaultTtlMs: 1000, sweepIntervalMs: 20 }, () => t);
    const c = client(svc);
    const ref = await c.put({ name: 'x', shape: [8], dtype: 'uint8' }, new Uint8Array(8));
    const file = objectPath(svc.shmDir, ref.objectId);
    expect(existsSync(file)).toBe(true);
    t = 1000;
    await expect.poll(() => existsSync(file), { timeout: 10_000 }).toBe(false);
    expect(svc.store.usage().memory).toMatchObject({ objects: 0, bytes: 0 });
  });

  it('touch restarts the TTL, optionally with a new one; the file mtime follows the expiry', async () => {
    let t = 1_000_000;
    const svc = await service({ defaultTtlMs: 1000 }, () => t);
    const c = client(svc);
    const ref = await c.put({ name: 'x', shape: [8], dtype: 'uint8' }, new Uint8Array(8));
    t = 1_000_900;
    expect((await c.touch(ref.objectId)).expiresAt).toBe(1_001_900);
    t = 1_001_500;
    await expect(c.stat(ref.objectId)).resolves.toBeDefined();
    const info = await c.touch(ref.objectId, 5000);
    expect(info).toMatchObject({ expiresAt: 1_006_500, ref: { ttlMs: 5000 } });
    expect(lstatSync(objectPath(svc.shmDir, ref.objectId)).mtimeMs).toBe(1_006_500);
    t = 1_006_500;
    expect((await rejection(c.stat(ref.objectId))).reason).toBe('OBJECT_EXPIRED');
  });

  it('stat returns the ref; delete is idempotent; unknown ids are NOT_FOUND', async () => {
    const svc = await service();
    const store = remoteStore(svc);
    const ref = await store.put({ requestId: 'r', name: 'x', data: Uint8Array.of(1, 2), shape: [2], dtype: 'uint8' });
    expect((await store.stat(ref)).ref).toEqual(ref);
    expect(await store.delete(ref)).toBe(true);
    expect(await store.delete(ref)).toBe(false);
    expect(existsSync(objectPath(svc.shmDir, ref.objectId))).toBe(false);
    const err = await rejection(store.get(ref));
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.reason).toBe('OBJECT_NOT_FOUND');
    expect((await rejection(store.stat('nope:x:1'))).reason).toBe('OBJECT_NOT_FOUND');
    expect((await rejection(store.stat(''))).field).toBe('object_id');
  });

  it('deleteRequest deletes what the client put for the request', async () => {
    const svc = await service();
    const store = remoteStore(svc);
    const a = await store.put({ requestId: 'A', name: 'x', data: Uint8Array.of(1), shape: [1], dtype: 'uint8' });
    await store.put({ requestId: 'A', name: 'y', data: Uint8Array.of(2), shape: [1], dtype: 'uint8' });
    const b = await store.put({ requestId: 'B', name: 'x', data: Uint8Array.of(3), shape: [1], dtype: 'uint8' });
    expect(await store.usage()).toMatchObject({ objects: 3, bytes: 3 });
    expect(await store.deleteRequest('A')).toBe(2);
    expect(await store.deleteRequest('A')).toBe(0);
    expect((await rejection(store.get(a))).reason).toBe('OBJECT_NOT_FOUND');
    await expect(store.get(b)).resolves.toBeDefined();
    expect(svc.store.usage().memory.objects).toBe(1);
  });
});

describe('object capabilities', () => {
  it('issues a capability in each ref and requires it to read, stat, touch and delete, the same way whether or not the object exists', async () => {
    const svc = await service({ capabilities: true, capabilityKeyFile: path.join(root, `cap-${seq + 1}.key`) });
    const c = client(svc);
    const mine = await c.put({ name: 'x', shape: [8], dtype: 'uint8' }, new Uint8Array(8).fill(7));
    const other = await c.put({ name: 'y', shape: [8], dtype: 'uint8' }, new Uint8Array(8));
    expect(mine.capability).toMatch(/^v1\.[A-Za-z0-9_-]{43}$/);
    expect(other.capability).not.toBe(mine.capability);
    const calls = (id: string, capability?: string) => {
      const opts = capability === undefined ? {} : { capability };
      return [c.get(id, opts), c.stat(id, opts), c.touch(id, 0, opts), c.delete(id, opts)];
    };
    // No capability, another object's, a made-up one, and an unknown id with a real one: all refused alike.
    for (const [id, cap] of [
      [mine.objectId, undefined],
      [mine.objectId, other.capability],
      [mine.objectId, 'v1.' + 'A'.repeat(43)],
      ['nobody:x:000000000000', mine.capability],
    ] as const) {
      for (const p of calls(id, cap)) {
        const err = await rejection(p);
        expect(err.code).toBe(Code.PERMISSION_DENIED);
        expect(err.reason).toBe('CAPABILITY_REQUIRED');
        expect(err.field).toBe('capability');
      }
    }
    // Still there after all that: the holder of the ref reads it.
    const got = await c.get(mine.objectId, { capability: mine.capability! });
    expect([...got.data]).toEqual(new Array(8).fill(7));
    expect(got.ref.capability).toBe(mine.capability);
    expect((await c.stat(mine.objectId, { capability: mine.capability! })).ref.objectId).toBe(mine.objectId);
    expect(await c.delete(mine.objectId, { capability: mine.capability! })).toBe(true);
  });

  it('a store client passes the ref’s capability on every call; the key is kept in its file (0600) and reused', async () => {
    const keyFile = path.join(root, 'kept-cap.key');
    const first = await service({ capabilities: true, capabilityKeyFile: keyFile });
    const store = remoteStore(first);
    const ref = await store.put(
      { requestId: 'req1', name: 'latents', data: floats(256), shape: [256], dtype: 'float32' },
      { ttlMs: 60_000 },
    );
    expect((await store.get(ref)).data.byteLength).toBe(1024);
    expect((await store.stat(ref)).ref.objectId).toBe(ref.objectId);
    await store.touch(ref, 60_000);
    // A bare id is refused: whoever wants the bytes must hold the ref.
    expect((await rejection(store.get(ref.objectId))).reason).toBe('CAPABILITY_REQUIRED');
    // deleteRequest deletes what the client put, with the capabilities it was given.
    expect(await store.deleteRequest('req1')).toBe(1);
    expect(lstatSync(keyFile).mode & 0o777).toBe(0o600);
    // A second service with the same key file (a restart, or a peer given the mesh's key) honours the same refs.
    const second = await service({ capabilities: true, capabilityKeyFile: keyFile });
    const ref2 = await remoteStore(second).put({ requestId: 'req2', name: 'x', data: floats(4), shape: [4], dtype: 'float32' });
    expect(ObjectCapabilities.fromFile(keyFile).issue(ref2.objectId)).toBe(ref2.capability);
  });
});

describe('capacity and spill', () => {
  it('fills memory to the threshold, spills to disk, then refuses with STORE_FULL', async () => {
    const svc = await service({
      chunkBytes: MiB,
      memoryCapacityBytes: 3 * MiB,
      spillThresholdBytes: 2 * MiB,
      diskCapacityBytes: 2 * MiB,
      retryAfterMs: 250,
    });
    const c = client(svc, { chunkBytes: MiB });
    const put = (name: string) => c.put({ name, shape: [MiB], dtype: 'uint8' }, randomBytes(MiB));

    const m1 = await put('m1');
    const m2 = await put('m2');
    expect(svc.store.usage().memory).toMatchObject({ objects: 2, bytes: 2 * MiB });
    const d1 = await put('d1');
    const d2 = await put('d2');
    expect(svc.store.usage().disk).toMatchObject({ objects: 2, bytes: 2 * MiB });
    // Spilled objects are files in the spill dir, linked from shared memory for same-node readers.
    const link = objectPath(svc.shmDir, d1.objectId);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    const spilled = readlinkSync(link);
    expect(path.dirname(spilled)).toBe(svc.config.spillDir);
    expect(existsSync(spilled)).toBe(true);
    expect(lstatSync(objectPath(svc.shmDir, m1.objectId)).isFile()).toBe(true);

    // Disk full: memory takes one more, up to its capacity, then nothing fits.
    await put('m3');
    expect(svc.store.usage().memory.bytes).toBe(3 * MiB);
    const err = await rejection(put('late'));
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.reason).toBe('STORE_FULL');
    expect(err.retryAfterMs).toBe(250);
    expect(err.message).toBe(
      'tensor store full: cannot hold "late" (1.0 MiB); shared memory 3.0 MiB of 3.0 MiB in use, disk 2.0 MiB of 2.0 MiB in use',
    );

    // Reads work from both tiers, and freeing space lets puts in again.
    const sameNode = remoteStore(svc, svc.nodeId);
    expect((await sameNode.get(d2)).data.byteLength).toBe(MiB);
    expect((await sameNode.get(m2)).data.byteLength).toBe(MiB);
    expect(sameNode.stats().shmReads).toBe(2);
    expect((await c.get(d1.objectId)).data.byteLength).toBe(MiB);
    await c.delete(d1.objectId);
    expect(existsSync(link)).toBe(false);
    expect(existsSync(spilled)).toBe(false);
    await expect(put('late')).resolves.toMatchObject({ sizeBytes: MiB });
  });

  it('reports a device that runs out of space (ENOSPC) as STORE_FULL', async () => {
    const svc = await service();
    const enospc = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const err = (svc.store as TieredStore).fsError(enospc, 'disk', { name: 'latents', sizeBytes: 3 * MiB }) as DiffmeshError;
    expect(err).toBeInstanceOf(DiffmeshError);
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.reason).toBe('STORE_FULL');
    expect(err.message).toBe(`tensor store full: no space left in ${svc.config.spillDir} (spill disk) while writing "latents" (3.0 MiB)`);
  });

  it('says when an object can never fit', async () => {
    const svc = await service({ chunkBytes: MiB, memoryCapacityBytes: MiB, diskCapacityBytes: 0 });
    const c = client(svc);
    const err = await rejection(c.put({ name: 'big', shape: [2 * MiB], dtype: 'uint8' }, new Uint8Array(2 * MiB)));
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.retryAfterMs).toBeUndefined();
    expect(err.message).toBe(
      'tensor store cannot hold "big" (2.0 MiB): larger than its capacity (shared memory 1.0 MiB, no disk spill configured)',
    );
  });

  it('a client retries STORE_FULL after the suggested delay and succeeds once space frees', async () => {
    const svc = await service({ chunkBytes: MiB, memoryCapacityBytes: MiB, diskCapacityBytes: 0, retryAfterMs: 100 });
    const store = remoteStore(svc, 'elsewhere', { retry: { attempts: 5, maxDelayMs: 150 } });
    const first = await store.put({ requestId: 'r', name: 'a', data: new Uint8Array(MiB), shape: [MiB], dtype: 'uint8' });
    const pending = store.put({ requestId: 'r', name: 'b', data: new Uint8Array(MiB), shape: [MiB], dtype: 'uint8' });
    await expect.poll(() => svc.metrics.snapshot().errors.Put, { interval: 5, timeout: 10_000 }).toBe(1);
    await store.delete(first);
    await expect(pending).resolves.toMatchObject({ name: 'b' });
    expect(store.stats().retries).toBeGreaterThanOrEqual(1);
  });
});

describe('malformed Put streams', () => {
  let raw: RawClient;
  let svc: RunningTensorService;
  beforeAll(async () => {
    svc = await startTensorService(
      {
        nodeId: 'malformed',
        shmDir: path.join(root, 'shm-malformed'),
        spillDir: path.join(root, 'spill-malformed'),
        sweepIntervalMs: 0,
        capabilities: false,
      },
      log,
    );
    const Ctor = loadDiffmeshProtos().diffmesh.tensor.v1.TensorService;
    raw = new Ctor(svc.address, grpc.credentials.createInsecure(), channelOptions());
  });
  afterAll(async () => {
    raw.close();
    await svc.stop(0);
  });

  /** Sends `messages` as one Put stream; resolves with the error the service answered. */
  function putStream(messages: PutRequest[]): Promise<DiffmeshError> {
    return new Promise((resolve, reject) => {
      const call = raw.Put((err, res) => (err ? resolve(fromWire(err)) : reject(new Error(`accepted: ${JSON.stringify(res)}`))));
      call.on('error', () => undefined);
      for (const m of messages) call.write(m);
      call.end();
    });
  }

  const header = (over: Record<string, unknown> = {}): PutRequest => ({
    header: { name: 'x', shape: ['4'], dtype: 'DTYPE_UINT8', sizeBytes: '4', ...over },
  });
  const chunk = (offset: number, data: number[]): PutRequest => ({ chunk: { offset: String(offset), data: Buffer.from(data) } });

  it.each([
    ['a chunk before the header', [chunk(0, [1, 2, 3, 4])], 'header', 'the first message of a Put must be a header'],
    ['an empty stream', [], 'header', 'ended without a header'],
    ['a message with neither header nor chunk', [{}], 'kind', 'header or a chunk'],
    ['a second header', [header(), header()], 'header', 'exactly one header'],
    ['an unspecified dtype', [header({ dtype: 'DTYPE_UNSPECIFIED' })], 'header.dtype', 'must be one of DTYPE_FLOAT32'],
    [
      'a size that does not match the shape',
      [header({ sizeBytes: '5' })],
      'header.size_bytes',
      '5 does not match shape [4] of uint8 (4 bytes)',
    ],
    ['fewer bytes than announced', [header(), chunk(0, [1, 2])], 'header.size_bytes', 'ended after 2 of 4 bytes'],
    ['more bytes than announced', [header(), chunk(0, [1, 2, 3, 4, 5])], 'chunk.data', '5 bytes received'],
    ['a gap between chunks', [header(), chunk(0, [1, 2]), chunk(3, [4])], 'chunk.offset', 'expected 2'],
    ['a missing name', [header({ name: '' })], 'header.name', 'is required'],
    ['a name with ":"', [header({ name: 'a:b' })], 'header.name', 'without ":"'],
    ['a malformed checksum', [header({ checksum: 'md5:abc' })], 'header.checksum', 'crc32c:<8 hex digits>'],
  ])('rejects %s with INVALID_ARGUMENT naming the field', async (_what, messages, field, text) => {
    const err = await putStream(messages);
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.field).toBe(field);
    expect(err.message).toContain(text);
  });

  it('keeps serving, with nothing reserved or left behind, after malformed streams', async () => {
    const c = new TensorServiceClient(svc.address);
    try {
      const ref = await c.put({ name: 'ok', shape: [3], dtype: 'uint8' }, Uint8Array.of(7, 8, 9));
      expect(Array.from((await c.get(ref.objectId)).data)).toEqual([7, 8, 9]);
      expect(svc.store.usage().memory).toMatchObject({ objects: 1, bytes: 3, reservedBytes: 0 });
      expect(svc.metrics.snapshot()).toMatchObject({ openStreams: 0, streamBufferedBytes: 0 });
    } finally {
      c.close();
    }
  });

  it('keeps nothing of a put whose client cancels after its last byte (found by the fuzz suite: the client was told CANCELLED, the object stayed)', async () => {
    const before = svc.store.usage().memory.objects;
    const err = await new Promise<DiffmeshError>((resolve) => {
      const call = raw.Put((e) => resolve(fromWire(e)));
      call.on('error', () => undefined);
      call.write(header());
      call.write(chunk(0, [1, 2, 3, 4]));
      // Every byte is there; the stream is reset instead of ended.
      setTimeout(() => call.cancel(), 100);
    });
    expect(err.code).toBe(Code.CANCELLED);
    // The commit may complete after the cancellation; the object goes once it does.
    await vi.waitFor(() => expect(svc.store.usage().memory).toMatchObject({ objects: before, reservedBytes: 0 }), { timeout: 3000 });
  });
});

describe('same-node puts through shared memory', () => {
  const incoming = (svc: RunningTensorService): string[] => readdirSync(path.join(svc.shmDir, INCOMING_DIR));

  it('writes the bytes into shared memory and sends only the header; the service verifies and takes the file over', async () => {
    const svc = await service();
    const sameNode = remoteStore(svc, svc.nodeId);
    const data = floats(256 * 1024, 3); // 1 MiB
    const ref = await sameNode.put({ requestId: 'r', name: 'latents', data, shape: [256 * 1024], dtype: 'float32' });
    expect(sameNode.stats()).toMatchObject({ puts: 1, shmWrites: 1 });
    expect(ref).toMatchObject({
      ownerAddress: svc.address,
      ownerNodeId: svc.nodeId,
      sizeBytes: data.byteLength,
      checksum: checksumOf(data),
    });
    // Another node reads it over gRPC; the same node from shared memory.
    expect(Buffer.from((await remoteStore(svc).get(ref)).data).equals(Buffer.from(data))).toBe(true);
    expect(Buffer.from((await sameNode.get(ref)).data).equals(Buffer.from(data))).toBe(true);
    expect(lstatSync(objectPath(svc.shmDir, ref.objectId)).isFile()).toBe(true);
    expect(incoming(svc)).toEqual([]);
    expect(svc.store.usage().memory).toMatchObject({ objects: 1, bytes: data.byteLength, reservedBytes: 0 });
    // Small objects keep going whole over gRPC.
    await sameNode.put({ requestId: 'r', name: 'small', data: floats(16), shape: [16], dtype: 'float32' });
    expect(sameNode.stats()).toMatchObject({ puts: 2, shmWrites: 1 });
  });

  it('refuses a bad file naming the field, deletes it, and keeps nothing reserved', async () => {
    const svc = await service();
    const c = client(svc);
    const write = (name: string, bytes: Uint8Array): string => {
      writeFileSync(incomingPath(svc.shmDir, name), bytes);
      return name;
    };
    const four = Uint8Array.of(1, 2, 3, 4);
    const header = { name: 'x', shape: [4], dtype: 'uint8' as const, checksum: checksumOf(four) };

    expect(await rejection(c.putObjectFile(header, 4, '../escape'))).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'shm_file' });
    expect(await rejection(c.putObjectFile(header, 4, 'missing'))).toMatchObject({ code: Code.NOT_FOUND, field: 'shm_file' });
    expect(await rejection(c.putObjectFile(header, 4, write('short', Uint8Array.of(1, 2))))).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      field: 'shm_file',
    });
    const corrupt = await rejection(c.putObjectFile(header, 4, write('corrupt', Uint8Array.of(9, 9, 9, 9))));
    expect(corrupt).toMatchObject({ code: Code.INVALID_ARGUMENT, reason: 'CHECKSUM_MISMATCH', field: 'header.checksum' });
    const outside = path.join(root, `outside-${seq}`);
    writeFileSync(outside, four);
    symlinkSync(outside, incomingPath(svc.shmDir, 'link'));
    expect(await rejection(c.putObjectFile(header, 4, 'link'))).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'shm_file' });
    expect(existsSync(outside)).toBe(true);

    expect(incoming(svc)).toEqual([]);
    expect(svc.store.usage().memory).toMatchObject({ objects: 0, bytes: 0, reservedBytes: 0 });
    const ok = await c.putObjectFile(header, 4, write('good', four));
    expect(Array.from((await c.get(ok.objectId)).data)).toEqual([1, 2, 3, 4]);
  });

  it('copies an object to the spill directory when memory is past its threshold', async () => {
    const svc = await service({ memoryCapacityBytes: 2 * MiB, spillThresholdBytes: MiB, diskCapacityBytes: 4 * MiB });
    const sameNode = remoteStore(svc, svc.nodeId);
    const put = (name: string) => sameNode.put({ requestId: 'r', name, data: randomBytes(MiB), shape: [MiB], dtype: 'uint8' });
    const inMemory = await put('a');
    const spilled = await put('b');
    expect(sameNode.stats().shmWrites).toBe(2);
    expect(svc.store.usage().memory).toMatchObject({ objects: 1, bytes: MiB, reservedBytes: 0 });
    expect(svc.store.usage().disk).toMatchObject({ objects: 1, bytes: MiB, reservedBytes: 0 });
    expect(lstatSync(objectPath(svc.shmDir, inMemory.objectId)).isFile()).toBe(true);
    expect(lstatSync(objectPath(svc.shmDir, spilled.objectId)).isSymbolicLink()).toBe(true);
    expect((await remoteStore(svc).get(spilled)).data.byteLength).toBe(MiB);
    expect(incoming(svc)).toEqual([]);
  });

  it('puts over gRPC, and stops trying shared memory, when the service does not see the files', async () => {
    const svc = await service();
    // A directory that looks like a tensor-svc's but is not this one's (a node id shared by mistake).
    const foreign = path.join(root, `foreign-${seq}`);
    mkdirSync(path.join(foreign, INCOMING_DIR), { recursive: true });
    const store = remoteStore(svc, 'elsewhere', { shmDir: foreign });
    const data = randomBytes(MiB);
    const first = await store.put({ requestId: 'r', name: 'a', data, shape: [MiB], dtype: 'uint8' });
    // The service refused the first file (NOT_FOUND, shm_file) and the object came over gRPC.
    expect(svc.metrics.snapshot().errors.Put).toBe(1);
    const second = await store.put({ requestId: 'r', name: 'b', data, shape: [MiB], dtype: 'uint8' });
    expect(svc.metrics.snapshot().errors.Put).toBe(1); // no second try through shared memory
    expect(store.stats()).toMatchObject({ puts: 2, shmWrites: 0 });
    expect(readdirSync(path.join(foreign, INCOMING_DIR))).toEqual([]);
    for (const ref of [first, second]) expect(Buffer.from((await client(svc).get(ref.objectId)).data).equals(data)).toBe(true);
  });

  it('keeps using shared memory after the service lost one file (swept while its put waited)', async () => {
    const svc = await service();
    const adopt = svc.store.adopt.bind(svc.store);
    let sweepFirst = true;
    // The first file disappears before the service takes it, as when the sweep deletes a file
    // whose put waited in a stalled stream for longer than INCOMING_ABANDONED_MS.
    svc.store.adopt = async (h, name) => {
      if (sweepFirst) rmSync(incomingPath(svc.shmDir, name));
      sweepFirst = false;
      return adopt(h, name);
    };
    const store = remoteStore(svc, svc.nodeId);
    const data = randomBytes(MiB);
    const first = await store.put({ requestId: 'r', name: 'a', data, shape: [MiB], dtype: 'uint8' });
    expect(svc.metrics.snapshot().errors.Put).toBe(1); // NOT_FOUND, shm_file: the object came over gRPC
    expect(store.stats()).toMatchObject({ puts: 1, shmWrites: 0 });
    const second = await store.put({ requestId: 'r', name: 'b', data, shape: [MiB], dtype: 'uint8' });
    expect(store.stats()).toMatchObject({ puts: 2, shmWrites: 1 });
    for (const ref of [first, second]) expect(Buffer.from((await store.get(ref)).data).equals(data)).toBe(true);
  });

  it('deletes files that clients left in .incoming without sending their put', async () => {
    const svc = await service();
    const old = incomingPath(svc.shmDir, 'abandoned');
    const fresh = incomingPath(svc.shmDir, 'in-progress');
    writeFileSync(old, 'x');
    writeFileSync(fresh, 'y');
    const past = new Date(Date.now() - 2 * INCOMING_ABANDONED_MS);
    utimesSync(old, past, past);
    await svc.store.sweep();
    expect(incoming(svc)).toEqual(['in-progress']);
  });
});

describe('same-node reads', () => {
  it('reads from shared memory when the node ids match, and over gRPC when they differ', async () => {
    const svc = await service();
    const writer = remoteStore(svc, svc.nodeId);
    const data = floats(1000);
    const ref = await writer.put({ requestId: 'r', name: 'x', data, shape: [1000], dtype: 'float32' });

    const before = svc.metrics.snapshot().calls.Get;
    const local = await writer.get(ref);
    expect(Buffer.from(local.data).equals(Buffer.from(data))).toBe(true);
    expect(svc.metrics.snapshot().calls.Get).toBe(before);
    expect(writer.stats()).toMatchObject({ shmReads: 1, remoteReads: 0 });

    const other = remoteStore(svc, 'other-node');
    const remote = await other.get(ref);
    expect(Buffer.from(remote.data).equals(Buffer.from(data))).toBe(true);
    expect(svc.metrics.snapshot().calls.Get).toBe(before + 1);
    expect(other.stats()).toMatchObject({ shmReads: 0, remoteReads: 1 });
  });

  it('falls back to the owner when the shared-memory file is gone or expired', async () => {
    let t = Date.now();
    const svc = await service({ defaultTtlMs: 60_000 }, () => t);
    const store = remoteStore(svc, svc.nodeId);
    const ref = await store.put({ requestId: 'r', name: 'x', data: Uint8Array.of(1, 2, 3), shape: [3], dtype: 'uint8' });
    t += 120_000; // past the TTL: the file's mtime says so, and the owner answers OBJECT_EXPIRED
    const expired = new RemoteTensorStore({ address: svc.address, nodeId: svc.nodeId, shmDir: svc.shmDir, now: () => t });
    closers.push(() => expired.close());
    expect((await rejection(expired.get(ref))).reason).toBe('OBJECT_EXPIRED');
    expect(expired.stats()).toMatchObject({ shmReads: 0 });
  });
});

describe('cancellation', () => {
  it('a cancelled Get releases the stream on the server', async () => {
    const svc = await service({ chunkBytes: MiB });
    const c = client(svc, { chunkBytes: MiB });
    const ref = await c.put({ name: 'x', shape: [32 * MiB], dtype: 'uint8' }, new Uint8Array(32 * MiB));
    const ac = new AbortController();
    const p = c.get(ref.objectId, {
      signal: ac.signal,
      into: (n) => {
        queueMicrotask(() => ac.abort());
        return new Uint8Array(n);
      },
    });
    const err = await rejection(p);
    expect(err.code).toBe(Code.CANCELLED);
    await expect.poll(() => svc.metrics.snapshot().openStreams, { timeout: 10_000 }).toBe(0);
    expect(svc.metrics.snapshot().streamBufferedBytes).toBe(0);
    expect(svc.metrics.snapshot().errors.Get).toBe(0);
  });

  it('a Put cancelled mid-stream leaves nothing reserved', async () => {
    const svc = await service({ chunkBytes: MiB });
    const c = client(svc, { chunkBytes: MiB, maxInflightBytes: MiB });
    const ac = new AbortController();
    const p = c.put({ name: 'x', shape: [64 * MiB], dtype: 'uint8' }, new Uint8Array(64 * MiB), { signal: ac.signal });
    await expect.poll(() => svc.metrics.snapshot().calls.Put, { interval: 1, timeout: 10_000 }).toBe(1);
    ac.abort();
    expect((await rejection(p)).code).toBe(Code.CANCELLED);
    await expect.poll(() => svc.store.usage().memory.reservedBytes, { timeout: 10_000 }).toBe(0);
    expect(svc.store.usage().memory.objects).toBe(0);
  });
});

describe('transient failures', () => {
  it('retries an unreachable owner a bounded number of times, then opens its breaker', async () => {
    const svc = await service();
    const addr = svc.address;
    await svc.stop();
    running.splice(0);
    const store = new RemoteTensorStore({
      address: addr,
      nodeId: 'n',
      retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 2 },
      breaker: { volumeThreshold: 3, resetTimeoutMs: 60_000 },
    });
    closers.push(() => store.close());
    const ref: ObjectRef = {
      objectId: 'r:x:1',
      ownerAddress: addr,
      ownerNodeId: 'gone',
      shape: [1],
      dtype: 'uint8',
      sizeBytes: 1,
      createdAt: 0,
      name: 'x',
      ttlMs: 0,
      checksum: '',
    };
    const first = await rejection(store.get(ref));
    expect(first.code).toBe(Code.UNAVAILABLE);
    expect(first.reason).not.toBe('BREAKER_OPEN');
    expect(store.stats().retries).toBeGreaterThanOrEqual(1);
    await rejection(store.get(ref));
    const open = await rejection(store.get(ref));
    expect(open.code).toBe(Code.UNAVAILABLE);
    expect(open.reason).toBe('BREAKER_OPEN');
    expect(open.message).toContain(addr);
  });
});

describe('a full store and the client breaker', () => {
  const outcome = (p: Promise<unknown>): Promise<string> =>
    p.then(
      () => 'ok',
      (e: DiffmeshError) => e.reason,
    );

  it('reports STORE_FULL as such, and reads and deletes of that owner go on', async () => {
    const svc = await service({ memoryCapacityBytes: 1024, spillThresholdBytes: 1024, diskCapacityBytes: 0, retryAfterMs: 10 });
    const store = remoteStore(svc, 'elsewhere', {
      retry: { baseDelayMs: 1, maxDelayMs: 20 },
      breaker: { volumeThreshold: 2, resetTimeoutMs: 60_000 },
    });
    const ref = await store.put({ requestId: 'r', name: 'a', data: new Uint8Array(1024), shape: [1024], dtype: 'uint8' });
    // Three attempts, each STORE_FULL: the breaker (2 failures open it) must not count them.
    expect(await outcome(store.put({ requestId: 'r', name: 'b', data: new Uint8Array(16), shape: [16], dtype: 'uint8' }))).toBe(
      'STORE_FULL',
    );
    expect(store.stats().retries).toBe(2);
    expect(await outcome(store.put({ requestId: 'r', name: 'b', data: new Uint8Array(16), shape: [16], dtype: 'uint8' }))).toBe(
      'STORE_FULL',
    );
    expect(await outcome(store.get(ref))).toBe('ok');
    expect(await outcome(store.delete(ref))).toBe('ok');
    // The delete freed the space.
    expect(await outcome(store.put({ requestId: 'r', name: 'b', data: new Uint8Array(16), shape: [16], dtype: 'uint8' }))).toBe('ok');
  });

  it('an object larger than the whole store is refused each time without opening the breaker', async () => {
    const svc = await service({ memoryCapacityBytes: 1024, spillThresholdBytes: 1024, diskCapacityBytes: 0 });
    const store = remoteStore(svc, 'elsewhere', { breaker: { volumeThreshold: 2, resetTimeoutMs: 60_000 } });
    const ref = await store.put({ requestId: 'r', name: 'a', data: new Uint8Array(8), shape: [8], dtype: 'uint8' });
    for (let i = 0; i < 3; i++) {
      const err = await rejection(store.put({ requestId: 'r', name: 'big', data: new Uint8Array(4096), shape: [4096], dtype: 'uint8' }));
      expect([err.code, err.reason]).toEqual([Code.RESOURCE_EXHAUSTED, 'STORE_FULL']);
    }
    expect(store.stats().retries).toBe(0);
    expect(await outcome(store.get(ref))).toBe('ok');
  });
});

describe('configuration', () => {
  it('reads DIFFMESH_TENSOR_* and flags, and derives directories from the node id', () => {
    const cfg = loadTensorSvcConfig({
      env: {
        DIFFMESH_TENSOR_NODE_ID: 'gpu-7',
        DIFFMESH_TENSOR_CHUNK_BYTES: String(4 * MiB),
        DIFFMESH_TENSOR_MEMORY_CAPACITY_BYTES: String(100 * MiB),
      },
      argv: ['--listen', '0.0.0.0:7000', '--advertise-address', 'gpu-7.internal:7000'],
    });
    const r = resolveTensorSvcConfig(cfg);
    expect(r).toMatchObject({ nodeId: 'gpu-7', chunkBytes: 4 * MiB, listen: '0.0.0.0:7000', advertiseAddress: 'gpu-7.internal:7000' });
    expect(r.shmDir).toMatch(/diffmesh-(shm-)?gpu-7$/);
    expect(r.spillDir).toMatch(/diffmesh-spill-gpu-7$/);
    expect(r.spillThresholdBytes).toBe(80 * MiB);
    expect(r.maxStreamBufferedBytes).toBe(8 * MiB);
  });

  it('fails fast naming the field', () => {
    const err = (() => {
      try {
        loadTensorSvcConfig({ env: { DIFFMESH_TENSOR_CHUNK_BYTES: '65536' } });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toContain('chunkBytes (from env DIFFMESH_TENSOR_CHUNK_BYTES)');
    expect(() => loadTensorSvcConfig({ env: {}, argv: ['--memory-capacity-bytes', '100', '--spill-threshold-bytes', '200'] })).toThrow(
      /spillThresholdBytes.*must not exceed memoryCapacityBytes/,
    );
  });

  it('refuses a directory another live tensor-svc owns', async () => {
    const svc = await service();
    await expect(startTensorService({ nodeId: 'x', shmDir: svc.shmDir, spillDir: path.join(root, 'other-spill') }, log)).rejects.toThrow(
      /in use by another tensor-svc/,
    );
  });
});
