import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos, type TensorServiceHandlers } from '@diffmesh/protos';
import { Code, DiffmeshError, objectRefToWire, toWire } from '@diffmesh/core';
import { ByteBudget } from './byte-budget.js';
import { EXPIRES_AT_METADATA } from './tensor-service-client.js';
import { RemoteTensorStore } from './remote-store.js';
import { defaultShmDir, objectFileName, objectPath } from './shm-paths.js';
import { rejection } from '@diffmesh/testing';

const dir = mkdtempSync(path.join(tmpdir(), 'diffmesh-tensor-client-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('object file names', () => {
  it('keep usual ids readable and encode the rest', () => {
    expect(objectFileName('3f1c:latents:0a1b2c3d4e5f')).toBe('3f1c:latents:0a1b2c3d4e5f');
    expect(objectFileName('a/b')).toBe('a%2Fb');
    expect(objectFileName('..')).toBe('%2E.');
    expect(objectFileName('.hidden')).toBe('%2Ehidden');
    expect(objectFileName('é x')).toBe('%C3%A9%20x');
    expect(objectFileName('100%')).toBe('100%25');
    expect(objectFileName('x'.repeat(300))).toMatch(/^![0-9a-f]{64}$/);
    expect(objectPath('/dev/shm/diffmesh-n', 'r:x:1')).toBe('/dev/shm/diffmesh-n/r:x:1');
  });

  it('never give two ids the same file', () => {
    const ids = ['a/b', 'a%2Fb', 'a%252Fb', '.x', '%2Ex', 'x'.repeat(201), 'x'.repeat(202), '!abc', '', 'a b', 'a%20b'];
    const names = ids.map(objectFileName);
    expect(new Set(names).size).toBe(ids.length);
    for (const n of names) expect(n.includes('/') || n.startsWith('.') || n.length > 200).toBe(false);
  });

  it('derive the shared-memory directory from the node id', () => {
    expect(defaultShmDir('gpu-1', dir)).toBe(path.join(dir, 'diffmesh-gpu-1'));
    expect(defaultShmDir('we ird/node', dir)).toBe(path.join(dir, 'diffmesh-we_ird_node'));
    expect(defaultShmDir('n', path.join(dir, 'missing'))).toBe(path.join(tmpdir(), 'diffmesh-shm-n'));
  });
});

describe('ByteBudget', () => {
  it('holds up to its limit and wakes a waiter when bytes are released', async () => {
    const deltas: number[] = [];
    const b = new ByteBudget(10, (d) => deltas.push(d));
    await b.acquire(6);
    await b.acquire(4);
    let got = false;
    const waiting = b.acquire(3).then(() => (got = true));
    await Promise.resolve();
    expect(got).toBe(false);
    b.release(6);
    await waiting;
    expect(b.inFlight).toBe(7);
    b.releaseAll();
    b.release(4); // a late write callback after the stream ended
    expect(b.inFlight).toBe(0);
    expect(deltas.reduce((a, d) => a + d, 0)).toBe(0);
  });

  it('lets one oversized item through when nothing is held', async () => {
    const b = new ByteBudget(4);
    await b.acquire(100);
    expect(b.inFlight).toBe(100);
  });

  it('stops waiting when the signal aborts', async () => {
    const b = new ByteBudget(4);
    await b.acquire(4);
    const ac = new AbortController();
    const p = b.acquire(1, ac.signal);
    ac.abort(new Error('gone'));
    await expect(p).rejects.toThrow('gone');
    expect(b.inFlight).toBe(4);
  });
});

describe('RemoteTensorStore', () => {
  /** A TensorService whose Stat fails with `failures` errors before answering. */
  async function fakeService(failures: grpc.ServiceError[]): Promise<{ address: string; calls: () => number; close: () => void }> {
    let calls = 0;
    const server = new grpc.Server();
    const ref = objectRefToWire({
      objectId: 'r:x:1',
      ownerAddress: 'fake',
      ownerNodeId: 'n',
      shape: [2],
      dtype: 'uint8',
      sizeBytes: 2,
      createdAt: 1000,
      name: 'x',
      ttlMs: 5000,
      checksum: 'crc32c:00000000',
    });
    const unimplemented = (_call: unknown, cb: (e: grpc.ServiceError) => void) =>
      cb(toWire(new DiffmeshError(Code.UNIMPLEMENTED, 'INTERNAL', 'no')));
    const handlers: TensorServiceHandlers = {
      Stat: (_call, cb) => {
        const err = failures[calls++];
        if (err) return cb(err);
        const md = new grpc.Metadata();
        md.set(EXPIRES_AT_METADATA, '123456');
        cb(null, { ref }, md);
      },
      Put: unimplemented,
      PutObjects: (call) => call.emit('error', toWire(new DiffmeshError(Code.UNIMPLEMENTED, 'INTERNAL', 'no'))),
      Get: (call) => call.emit('error', toWire(new DiffmeshError(Code.UNIMPLEMENTED, 'INTERNAL', 'no'))),
      Delete: unimplemented,
      Touch: unimplemented,
    };
    server.addService(loadDiffmeshProtos().diffmesh.tensor.v1.TensorService.service, handlers);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    return { address: `127.0.0.1:${port}`, calls: () => calls, close: () => server.forceShutdown() };
  }

  const unavailable = (): grpc.ServiceError => toWire(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'try later'));

  it('retries transient failures with backoff and reads the expiry from the trailers', async () => {
    const fake = await fakeService([unavailable(), unavailable()]);
    const store = new RemoteTensorStore({ address: fake.address, nodeId: 'me', retry: { attempts: 3, baseDelayMs: 1 } });
    try {
      const info = await store.stat('r:x:1');
      expect(info).toMatchObject({ expiresAt: 123456, ref: { objectId: 'r:x:1', sizeBytes: 2, dtype: 'uint8' } });
      expect(fake.calls()).toBe(3);
      expect(store.stats().retries).toBe(2);
    } finally {
      await store.close();
      fake.close();
    }
  });

  it('gives up after the last attempt and never retries a caller error', async () => {
    const fake = await fakeService([unavailable(), unavailable(), toWire(new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', 'gone'))]);
    const store = new RemoteTensorStore({ address: fake.address, nodeId: 'me', retry: { attempts: 2, baseDelayMs: 1 } });
    try {
      expect((await rejection(store.stat('r:x:1'))).code).toBe(Code.UNAVAILABLE);
      expect(fake.calls()).toBe(2);
      const notFound = await rejection(store.stat('r:x:1'));
      expect(notFound.reason).toBe('OBJECT_NOT_FOUND');
      expect(fake.calls()).toBe(3);
    } finally {
      await store.close();
      fake.close();
    }
  });

  it("its breaker counts failures to reach the owner, never the service's answers", async () => {
    const answered = (code: Code, reason: 'STORE_FULL' | 'INTERNAL' | 'OBJECT_NOT_FOUND'): grpc.ServiceError =>
      toWire(new DiffmeshError(code, reason, 'no'));
    // A status without diffmesh details: what grpc-js raises for a broken stream or protocol error.
    const bareInternal = (): grpc.ServiceError =>
      Object.assign(new Error('13 INTERNAL: Received RST_STREAM with code 2'), {
        code: grpc.status.INTERNAL,
        details: 'Received RST_STREAM with code 2',
        metadata: new grpc.Metadata(),
      });
    const fake = await fakeService([
      answered(Code.RESOURCE_EXHAUSTED, 'STORE_FULL'),
      answered(Code.RESOURCE_EXHAUSTED, 'STORE_FULL'),
      answered(Code.INTERNAL, 'INTERNAL'),
      answered(Code.NOT_FOUND, 'OBJECT_NOT_FOUND'),
      bareInternal(),
    ]);
    // Any counted failure past the first two calls opens it.
    const store = new RemoteTensorStore({
      address: fake.address,
      nodeId: 'me',
      retry: { attempts: 1 },
      breaker: { volumeThreshold: 2, errorThresholdPercentage: 1, resetTimeoutMs: 60_000 },
    });
    try {
      expect((await rejection(store.stat('r:x:1'))).reason).toBe('STORE_FULL');
      expect((await rejection(store.stat('r:x:1'))).reason).toBe('STORE_FULL');
      expect((await rejection(store.stat('r:x:1'))).reason).toBe('INTERNAL');
      expect((await rejection(store.stat('r:x:1'))).reason).toBe('OBJECT_NOT_FOUND');
      // Four answers, none counted; a transport failure is.
      expect((await rejection(store.stat('r:x:1'))).code).toBe(Code.INTERNAL);
      expect((await rejection(store.stat('r:x:1'))).reason).toBe('BREAKER_OPEN');
      expect(fake.calls()).toBe(5);
    } finally {
      await store.close();
      fake.close();
    }
  });

  it('gives the last real failure, not BREAKER_OPEN, when the breaker opens between attempts', async () => {
    const fake = await fakeService([unavailable(), unavailable(), unavailable()]);
    const store = new RemoteTensorStore({
      address: fake.address,
      nodeId: 'me',
      retry: { attempts: 3, baseDelayMs: 1 },
      breaker: { volumeThreshold: 2, resetTimeoutMs: 60_000 },
    });
    try {
      const err = await rejection(store.stat('r:x:1'));
      expect([err.code, err.reason, err.message]).toEqual([Code.UNAVAILABLE, 'TRANSPORT', 'try later']);
      expect(fake.calls()).toBe(2); // the third attempt met the open breaker
      expect((await rejection(store.stat('r:x:1'))).reason).toBe('BREAKER_OPEN');
    } finally {
      await store.close();
      fake.close();
    }
  });

  it('without a local address, follows refs but refuses puts and bare ids', async () => {
    const store = new RemoteTensorStore({ address: '', nodeId: 'me', sameNodeReads: false });
    try {
      const put = await rejection(store.put({ requestId: 'r', name: 'x', data: new Uint8Array(1), shape: [1], dtype: 'uint8' }));
      expect(put.code).toBe(Code.FAILED_PRECONDITION);
      expect((await rejection(store.get('r:x:1'))).code).toBe(Code.FAILED_PRECONDITION);
    } finally {
      await store.close();
    }
  });

  it('validates puts before any call', async () => {
    const store = new RemoteTensorStore({ address: '127.0.0.1:1', nodeId: 'me' });
    try {
      const err = await rejection(store.put({ requestId: 'r', name: 'x', data: new Uint8Array(3), shape: [2], dtype: 'uint8' }));
      expect(err.field).toBe('data');
      expect((await rejection(store.put({ requestId: 'a:b', name: 'x', data: new Uint8Array(1), shape: [1], dtype: 'uint8' }))).field).toBe(
        'request_id',
      );
      await store.close();
      expect((await rejection(store.stat('x'))).reason).toBe('DRAINING');
    } finally {
      await store.close();
    }
  });
});
