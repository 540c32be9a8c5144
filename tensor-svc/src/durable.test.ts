import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { Code, createLogger, silentLogger } from '@diffmesh/core';
import {
  DurableStores,
  RemoteTensorStore,
  RoutedTensorStore,
  TensorServiceClient,
  openDurableStore,
  withPutOptions,
  type DurableStore,
  type PutTensorInput,
} from '@diffmesh/tensor-client';
import { startRedisServer, startS3Server, type RunningRedisServer, type RunningS3Server, rejection } from '@diffmesh/testing';
import type { TensorSvcConfigInput } from './config.js';
import { startTensorService, type RunningTensorService } from './server.js';

// tensor-svc with a durable store: write-through from its node's tiers, or redis/S3 as its backend.
const MiB = 1024 * 1024;
const log = silentLogger();

let root: string;
let redis: RunningRedisServer;
let s3: RunningS3Server;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-tensor-durable-'));
  [redis, s3] = await Promise.all([startRedisServer(), startS3Server({ buckets: ['tensors'] })]);
});
afterAll(async () => {
  await Promise.all([redis?.stop(), s3?.stop()]);
  await rm(root, { recursive: true, force: true });
});

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

let seq = 0;
/** A redis location of its own for each test (keys under a fresh prefix). */
function redisUri(): string {
  return `${redis.url}/0/t${randomBytes(4).toString('hex')}`;
}

async function service(cfg: TensorSvcConfigInput = {}): Promise<RunningTensorService> {
  seq += 1;
  const svc = await startTensorService(
    {
      nodeId: `node-${seq}`,
      shmDir: path.join(root, `shm-${seq}`),
      spillDir: path.join(root, `spill-${seq}`),
      sweepIntervalMs: 0,
      durableSweepIntervalMs: 0,
      drainGraceMs: 1000,
      // The tensor services of one mesh share their capability key: a ref one of them issued
      // is honoured by another that serves the object from the durable copy.
      capabilityKeyFile: path.join(root, 'capability.key'),
      ...cfg,
    },
    log,
    { env: { AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: s3.region } },
  );
  closers.push(() => svc.stop(0));
  return svc;
}

/** A client on another node (everything over gRPC), or on the service's node. */
function remote(svc: RunningTensorService, sameNode = false): RemoteTensorStore {
  const s = new RemoteTensorStore({
    address: svc.address,
    nodeId: sameNode ? svc.nodeId : 'elsewhere',
    shmDir: sameNode ? svc.shmDir : path.join(root, 'no-shm'),
    chunkBytes: MiB,
    retry: { attempts: 2, baseDelayMs: 10 },
  });
  closers.push(() => s.close());
  return s;
}

function durable(uri: string): DurableStore {
  const d = openDurableStore(uri, { s3Endpoint: s3.endpoint, s3Region: s3.region });
  closers.push(() => d.close());
  return d;
}

function tensor(name: string, bytes: number, seed = 1): PutTensorInput {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (i * 31 + seed) & 0xff;
  return { requestId: 'req1', name, data, shape: [bytes], dtype: 'uint8' };
}

// The AWS SDK reads the credentials s3rver accepts from the standard variables.
process.env.AWS_ACCESS_KEY_ID ??= 'S3RVER';
process.env.AWS_SECRET_ACCESS_KEY ??= 'S3RVER';

describe('write-through (backend memory with --durable)', () => {
  it('copies every object to redis before answering the put, whichever way it came, and deletes both copies', async () => {
    const uri = redisUri();
    const svc = await service({ durable: uri, chunkBytes: MiB });
    const small = await remote(svc).put(tensor('small', 1000)); // PutObjects stream
    const large = await remote(svc).put(tensor('large', 5 * MiB)); // chunked Put
    const shm = await remote(svc, true).put(tensor('shm', 300 * 1024)); // same-node file in .incoming
    const copies = durable(uri);
    for (const [ref, n] of [
      [small, 1000],
      [large, 5 * MiB],
      [shm, 300 * 1024],
    ] as const) {
      expect(ref.durableUri).toBe(uri.replace(/^redis:\/\/127\.0\.0\.1:/, 'redis://127.0.0.1:'));
      const copy = await copies.get(ref.objectId);
      expect(copy.ref.checksum).toBe(ref.checksum);
      expect(copy.data.byteLength).toBe(n);
      expect((await svc.store.stat(ref.objectId)).ref.durableUri).toBe(ref.durableUri);
    }
    // Touch reaches the copy; delete removes both.
    const touched = await remote(svc).touch(large, 120_000);
    expect((await copies.stat(large.objectId)).expiresAt).toBeGreaterThan(touched.expiresAt - 5000);
    expect(await remote(svc).delete(large)).toBe(true);
    expect((await rejection(copies.get(large.objectId))).reason).toBe('OBJECT_NOT_FOUND');
  });

  it('with policy final copies only a request result, and respects the size range', async () => {
    const uri = redisUri();
    const svc = await service({ durable: uri, writeThrough: 'final', writeThroughMinBytes: 100 });
    const store = remote(svc);
    const intermediate = await store.put(tensor('latents', 1000));
    const result = await withPutOptions({ finalResult: true }, () => store.put(tensor('pixels', 1000)));
    const tiny = await store.put(tensor('tiny', 10), { finalResult: true });
    expect(intermediate.durableUri ?? '').toBe('');
    expect(result.durableUri).toBeTruthy();
    expect(tiny.durableUri ?? '').toBe('');
    expect((await durable(uri).get(result.objectId)).data.byteLength).toBe(1000);
  });

  it('refuses the put, keeping nothing, when the durable store cannot take it', async () => {
    const down = await startRedisServer();
    await down.stop();
    const svc = await service({ durable: `${down.url}/0` });
    const err = await rejection(remote(svc).put(tensor('x', 1000)));
    expect(err.code).toBe(Code.UNAVAILABLE);
    expect(err.message).toContain('could not write "x" through to');
    expect(svc.store.usage().memory.objects).toBe(0);
  });

  it('serves an object it no longer holds from the durable copy (a new service on a new node)', async () => {
    const uri = `s3://tensors/wt-${randomBytes(3).toString('hex')}`;
    const first = await service({ durable: uri });
    const ref = await remote(first).put(tensor('latents', 2 * MiB + 5));
    expect(ref.durableUri).toBe(uri);
    await first.stop(0); // a graceful stop deletes its local objects; the durable copy stays
    const second = await service({ durable: uri });
    // The ref, its owner gone: asked of the new service (which shares the mesh's capability key).
    const moved = { ...ref, ownerAddress: '', ownerNodeId: '' };
    const got = await remote(second).get(moved);
    expect(got.data.byteLength).toBe(2 * MiB + 5);
    expect(got.ref.checksum).toBe(ref.checksum);
    const part = await remote(second).get(moved, { offset: MiB, length: 10 });
    expect(Buffer.from(part.data).equals(tensor('latents', 2 * MiB + 5).data.subarray(MiB, MiB + 10))).toBe(true);
  });
});

describe('reads follow the ref: shared memory, then the owner, then the durable copy', () => {
  it('falls back to the durable copy when the owner is gone, and deletes it there', async () => {
    const uri = redisUri();
    const svc = await service({ durable: uri });
    const ref = await remote(svc).put(tensor('latents', 100_000));
    await svc.stop(0);
    const stores = new DurableStores({ redisCredentials: [redis.url] });
    const reader = new RoutedTensorStore({
      remote: new RemoteTensorStore({ address: '', nodeId: 'reader', retry: { attempts: 1 } }),
      durable: stores,
    });
    closers.push(() => reader.close());
    const got = await reader.get(ref);
    expect(Buffer.from(got.data).equals(tensor('latents', 100_000).data)).toBe(true);
    expect(reader.stats().durableFallbacks).toBe(1);
    expect(await reader.delete(ref)).toBe(true);
    expect((await rejection(reader.get(ref))).code).toBe(Code.UNAVAILABLE); // owner gone, copy deleted: the owner's error
  });

  it('puts straight into redis with no tensor-svc at all, and reads those refs back', async () => {
    const uri = redisUri();
    const stores = new DurableStores();
    const direct = durable(uri);
    const store = new RoutedTensorStore({ remote: new RemoteTensorStore({ address: '', nodeId: 'n' }), direct, durable: stores });
    const ref = await store.put(tensor('latents', 70_000));
    expect(ref).toMatchObject({ ownerAddress: '', durableUri: direct.uri });
    expect((await store.get(ref)).data.byteLength).toBe(70_000);
    expect(await store.deleteRequest('req1')).toBe(1);
    await store.close();
  });
});

describe.each(['redis', 's3'] as const)('backend %s', (backend) => {
  it('serves Put, Get (whole and ranges), Stat, Touch and Delete from the durable store, with no shared memory', async () => {
    const uri = backend === 'redis' ? redisUri() : `s3://tensors/b-${randomBytes(3).toString('hex')}`;
    const svc = await service({ backend, durable: uri, chunkBytes: MiB });
    expect(svc.shmDir).toBe('');
    const sameNode = remote(svc, true);
    const big = tensor('big', 9 * MiB + 7);
    const ref = await sameNode.put(big); // chunked Put, streamed into the store
    const small = await sameNode.put(tensor('small', 2000)); // PutObjects
    expect(ref).toMatchObject({ ownerAddress: svc.address, durableUri: uri, sizeBytes: 9 * MiB + 7 });
    expect(Buffer.from((await sameNode.get(ref)).data).equals(big.data)).toBe(true);
    expect(sameNode.stats().shmReads + sameNode.stats().shmWrites).toBe(0);
    const c = new TensorServiceClient(svc.address);
    closers.push(async () => c.close());
    const part = await c.get(ref.objectId, { offset: 4 * MiB, length: 100, ...(ref.capability ? { capability: ref.capability } : {}) });
    expect(Buffer.from(part.data).equals(big.data.subarray(4 * MiB, 4 * MiB + 100))).toBe(true);
    expect((await durable(uri).get(small.objectId)).data.byteLength).toBe(2000);
    const info = await sameNode.touch(small, 99_000);
    expect(info.ref.ttlMs).toBe(99_000);
    expect(await sameNode.delete(ref)).toBe(true);
    expect((await rejection(sameNode.get(ref))).reason).toBe('OBJECT_NOT_FOUND');
  });
});

describe('credentials', () => {
  it('uses a password-protected redis without ever logging the password', async () => {
    const locked = await startRedisServer({ password: 'hunter2-secret' });
    closers.push(() => locked.stop());
    let text = '';
    const logger = createLogger({
      name: 'tensor-svc',
      level: 'trace',
      destination: new Writable({
        write(chunk: Buffer, _enc, cb) {
          text += chunk.toString();
          cb();
        },
      }),
    });
    seq += 1;
    const svc = await startTensorService(
      {
        nodeId: `node-${seq}`,
        shmDir: path.join(root, `shm-${seq}`),
        spillDir: path.join(root, `spill-${seq}`),
        durable: `${locked.url}/0`,
      },
      logger,
    );
    closers.push(() => svc.stop(0));
    const ref = await remote(svc).put(tensor('x', 1000));
    expect(ref.durableUri).toBe(`redis://127.0.0.1:${locked.port}/0`);
    expect(text).toContain(`"durableStore":"redis://127.0.0.1:${locked.port}/0"`);
    expect(text).not.toContain('hunter2');
  });
});

describe('configuration', () => {
  it('needs a location for the redis and s3 backends and never prints credentials', async () => {
    await expect(service({ backend: 's3' })).rejects.toThrow('is required with backend s3');
    await expect(service({ backend: 'redis' })).rejects.toThrow('or set REDIS_URL');
    const err = await service({ backend: 's3', durable: 'redis://user:hunter2@h:1/0' }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(String(err)).toContain('redis://***@h:1/0 is not a s3 location');
    expect(String(err)).not.toContain('hunter2');
  });
});
