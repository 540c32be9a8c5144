import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Code } from '@diffmesh/core';
import { RemoteTensorStore, objectFileName, type PutTensorInput } from '@diffmesh/tensor-client';
import { rejection } from '@diffmesh/testing';

// tensor-svc as a process, killed with SIGKILL and started again on the same directories.
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const KiB = 1024;
const MiB = 1024 * KiB;

let root: string;
const procs: ChildProcessByStdio<null, Readable, Readable>[] = [];
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-tensor-recovery-'));
});
afterAll(async () => {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  await rm(root, { recursive: true, force: true });
});

interface Proc {
  address: string;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

function start(env: Record<string, string>): Promise<Proc> {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, DIFFMESH_TENSOR_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.push(child);
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`tensor-svc did not start:\n${stderr}`)), 20_000);
    void exited.then(() => reject(new Error(`tensor-svc exited:\n${stderr}`)));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const address = /tensor-svc listening on (\S+)\n/.exec(out)?.[1];
      if (address) {
        clearTimeout(timer);
        resolve({
          address,
          kill: async () => {
            child.kill('SIGKILL');
            await exited;
          },
          stop: async () => {
            child.kill('SIGTERM');
            await exited;
          },
        });
      }
    });
  });
}

function tensor(name: string, bytes: number): PutTensorInput {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (i * 13 + name.length) & 0xff;
  return { requestId: 'req1', name, data, shape: [bytes], dtype: 'uint8' };
}

describe('restart after SIGKILL', () => {
  it('finds the objects in shared memory and on the spill disk again, with their checksums and TTLs; expired ones are deleted', async () => {
    const shmDir = path.join(root, 'shm');
    const spillDir = path.join(root, 'spill');
    const env = {
      DIFFMESH_TENSOR_NODE_ID: 'recovery-node',
      DIFFMESH_TENSOR_SHM_DIR: shmDir,
      DIFFMESH_TENSOR_SPILL_DIR: spillDir,
      DIFFMESH_TENSOR_MEMORY_CAPACITY_BYTES: String(8 * MiB),
      DIFFMESH_TENSOR_SPILL_THRESHOLD_BYTES: String(MiB),
      DIFFMESH_TENSOR_CHUNK_BYTES: String(MiB),
    };
    const first = await start(env);
    const client = (address: string): RemoteTensorStore => new RemoteTensorStore({ address, nodeId: 'elsewhere', retry: { attempts: 1 } });
    let c = client(first.address);
    const inMemory = await c.put(tensor('memory', 512 * KiB), { ttlMs: 120_000 });
    const spilled = await c.put(tensor('spilled', 2 * MiB), { ttlMs: 120_000 });
    const shortLived = await c.put(tensor('short', KiB), { ttlMs: 1500 });
    const before = await c.stat(inMemory);
    const shortExpiry = (await c.stat(shortLived)).expiresAt;
    expect(readdirSync(spillDir).filter((n) => !n.startsWith('.'))).toHaveLength(1);
    await c.close();

    await first.kill();
    // A file that is no object (no sidecar beside it), as a crash mid-write could leave.
    writeFileSync(path.join(shmDir, 'req1:stray:000000000000'), 'stray');
    await sleep(Math.max(0, shortExpiry - Date.now() + 100));

    // Restarted where it ran: the refs name its address.
    const second = await start({ ...env, DIFFMESH_TENSOR_LISTEN: first.address });
    c = client(second.address);
    try {
      for (const [ref, n] of [
        [inMemory, 512 * KiB],
        [spilled, 2 * MiB],
      ] as const) {
        const got = await c.get(ref); // tensor-svc verifies the checksum of every Get
        expect(got.data.byteLength).toBe(n);
        expect(Buffer.from(got.data).equals(tensor(ref.name, n).data)).toBe(true);
        expect(got.ref).toMatchObject({ objectId: ref.objectId, checksum: ref.checksum, shape: ref.shape, ttlMs: 120_000 });
      }
      expect(Math.abs((await c.stat(inMemory)).expiresAt - before.expiresAt)).toBeLessThan(5);
      const gone = await rejection(c.get(shortLived));
      expect(gone.code).toBe(Code.NOT_FOUND);
      expect(existsSync(path.join(shmDir, objectFileName(shortLived.objectId)))).toBe(false);
      expect(existsSync(path.join(shmDir, '.meta', objectFileName(shortLived.objectId)))).toBe(false);
      expect(existsSync(path.join(shmDir, 'req1:stray:000000000000'))).toBe(false);
      // Objects put after the restart live beside the recovered ones.
      expect((await c.put(tensor('after', 10 * KiB))).sizeBytes).toBe(10 * KiB);
    } finally {
      await c.close();
    }

    // Without recovery, a restart starts empty.
    await second.kill();
    const third = await start({ ...env, DIFFMESH_TENSOR_LISTEN: first.address, DIFFMESH_TENSOR_RECOVER: 'false' });
    c = client(third.address);
    try {
      expect((await rejection(c.get(inMemory))).reason).toBe('OBJECT_NOT_FOUND');
      expect(readdirSync(spillDir).filter((n) => !n.startsWith('.'))).toHaveLength(0);
    } finally {
      await c.close();
      await third.stop();
    }
  });
});
