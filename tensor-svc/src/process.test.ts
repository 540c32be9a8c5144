import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { crc32c } from '@node-rs/crc32';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos, type TensorGetResponse__Output } from '@diffmesh/protos';
import { RemoteTensorStore, TensorServiceClient, defaultShmDir, formatChecksum } from '@diffmesh/tensor-client';
import { channelOptions, silentLogger } from '@diffmesh/core';
import { createDiscovery } from '@diffmesh/discovery';
import { findNatsServer, startNatsServer } from '@diffmesh/testing';
import { readMetric } from './metrics.js';

// tensor-svc as users run it: `node tensor-svc/dist/main.js` in its own process (build first).
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const MiB = 1024 * 1024;
const CHUNK = 2 * MiB;

interface TensorProcess {
  address: string;
  metricsUrl: string;
  shmDir: string;
  scrape(): Promise<string>;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
}

const procs: ChildProcessByStdio<null, Readable, Readable>[] = [];
afterAll(() => {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
});

/** Starts tensor-svc with `DIFFMESH_TENSOR_*` settings and waits for its listen and metrics lines. */
function startProcess(env: Record<string, string>, shmDir: string): Promise<TensorProcess> {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, DIFFMESH_TENSOR_LOG_LEVEL: 'warn', DIFFMESH_TENSOR_METRICS_LISTEN: '127.0.0.1:0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.push(child);
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let out = '';
    let address = '';
    const timer = setTimeout(() => reject(new Error(`tensor-svc did not start:\n${stderr}`)), 20_000);
    void exited.then((code) => reject(new Error(`tensor-svc exited with ${code}:\n${stderr}`)));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      address ||= /tensor-svc listening on (\S+)\n/.exec(out)?.[1] ?? '';
      const metricsUrl = /tensor-svc metrics on (\S+)\n/.exec(out)?.[1];
      if (address && metricsUrl) {
        clearTimeout(timer);
        resolve({
          address,
          metricsUrl,
          shmDir,
          scrape: async () => (await fetch(metricsUrl)).text(),
          stop: () => {
            child.kill('SIGTERM');
            return exited;
          },
        });
      }
    });
  });
}

function metric(page: string, name: string, labels: Record<string, string> = {}): number {
  const v = readMetric(page, name, labels);
  if (v === undefined) throw new Error(`metric ${name} missing`);
  return v;
}

// Top-level await: the NATS test runs only where nats-server is installed.
const natsBinary = await findNatsServer();

let root: string;
beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} not found: build first (npx tsc -b tensor-svc)`);
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-tensor-proc-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('tensor-svc as a separate process', () => {
  it('keeps its memory bounded while a client stops reading a 96 MiB object', async () => {
    const shmDir = path.join(root, 'slow-shm');
    const svc = await startProcess(
      {
        DIFFMESH_TENSOR_NODE_ID: `slow-${process.pid}`,
        DIFFMESH_TENSOR_SHM_DIR: shmDir,
        DIFFMESH_TENSOR_SPILL_DIR: path.join(root, 'slow-spill'),
        DIFFMESH_TENSOR_CHUNK_BYTES: String(CHUNK),
        DIFFMESH_TENSOR_MEMORY_CAPACITY_BYTES: String(512 * MiB),
      },
      shmDir,
    );
    const size = 96 * MiB;
    const data = new Uint8Array(size);
    for (let i = 0; i < size; i += 4096) data[i] = (i / 4096) & 0xff;
    const writer = new TensorServiceClient(svc.address);
    const ref = await writer.put({ name: 'big', shape: [size], dtype: 'uint8' }, data);
    writer.close();

    const Ctor = loadDiffmeshProtos().diffmesh.tensor.v1.TensorService;
    const raw = new Ctor(svc.address, grpc.credentials.createInsecure(), channelOptions());
    const stream = raw.Get({ objectId: ref.objectId, capability: ref.capability ?? '' });
    const chunks: Buffer[] = [];
    let paused = false;
    stream.on('data', (msg: TensorGetResponse__Output) => {
      if (msg.kind === 'chunk' && msg.chunk) {
        chunks.push(msg.chunk.data);
        if (!paused) {
          paused = true;
          stream.pause(); // the slow reader: takes one chunk, then stops reading
        }
      }
    });
    const ended = new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    });

    // The server stalls once the client's HTTP/2 window, grpc-js's read-ahead and the socket
    // buffers are full: wait until it has sent nothing new for several scrapes.
    let sent = -1;
    let stable = 0;
    let page = '';
    for (let i = 0; i < 400 && stable < 10; i++) {
      await new Promise((r) => setTimeout(r, 50));
      page = await svc.scrape();
      const now = metric(page, 'diffmesh_tensor_get_sent_bytes_total');
      stable = now === sent ? stable + 1 : 0;
      sent = now;
    }
    expect(stable).toBe(10);
    const heapAtStall = metric(page, 'diffmesh_tensor_process_array_buffers_bytes');

    // Stay paused a while longer: nothing more may be sent or buffered.
    await new Promise((r) => setTimeout(r, 1000));
    const later = await svc.scrape();
    const buffered = metric(later, 'diffmesh_tensor_stream_buffered_bytes');
    const bufferedMax = metric(later, 'diffmesh_tensor_stream_buffered_max_bytes');
    const heapGrowth = metric(later, 'diffmesh_tensor_process_array_buffers_bytes') - heapAtStall;
    const sentLater = metric(later, 'diffmesh_tensor_get_sent_bytes_total');
    expect(metric(later, 'diffmesh_tensor_open_streams')).toBe(1);
    // Flow control stopped the server well before the end of the object (about 48 MiB: the
    // client's 16 MiB HTTP/2 window, grpc-js's 16-message read-ahead, socket buffers)…
    expect(sentLater).toBeLessThan(size - 8 * CHUNK);
    // …and what it holds for the stream stays under its budget (2 chunks by default).
    expect(buffered).toBeLessThanOrEqual(2 * CHUNK);
    expect(bufferedMax).toBeLessThan(3 * CHUNK);
    expect(heapGrowth).toBeLessThan(3 * CHUNK);

    stream.resume();
    await ended;
    raw.close();
    const total = chunks.reduce((n, c) => n + c.byteLength, 0);
    expect(total).toBe(size);
    let crc = 0;
    for (const c of chunks) crc = crc32c(c, crc);
    expect(formatChecksum(crc)).toBe(ref.checksum);
    const after = await svc.scrape();
    expect(metric(after, 'diffmesh_tensor_get_sent_bytes_total')).toBe(size);
    expect(metric(after, 'diffmesh_tensor_stream_buffered_bytes')).toBe(0);

    expect(await svc.stop()).toBe(0);
    expect(existsSync(shmDir)).toBe(false);
  });

  it('serves a same-node reader from shared memory and another node over gRPC', async () => {
    const nodeId = `shmtest-${process.pid}`;
    const shmDir = defaultShmDir(nodeId);
    const svc = await startProcess({ DIFFMESH_TENSOR_NODE_ID: nodeId, DIFFMESH_TENSOR_SPILL_DIR: path.join(root, 'shm-spill') }, shmDir);
    const local = new RemoteTensorStore({ address: svc.address, nodeId });
    const remote = new RemoteTensorStore({ address: svc.address, nodeId: 'some-other-node' });
    try {
      const data = new Uint8Array(8 * MiB).map((_, i) => i % 251);
      const ref = await local.put({ requestId: 'req', name: 'latents', data, shape: [8 * MiB], dtype: 'uint8' });
      expect(ref.ownerNodeId).toBe(nodeId);
      expect(existsSync(path.join(shmDir, ref.objectId))).toBe(true);

      const viaShm = await local.get(ref);
      expect(Buffer.from(viaShm.data).equals(Buffer.from(data))).toBe(true);
      expect(local.stats()).toMatchObject({ shmReads: 1, remoteReads: 0 });
      expect(metric(await svc.scrape(), 'diffmesh_tensor_calls_total', { method: 'Get' })).toBe(0);

      const viaGrpc = await remote.get(ref);
      expect(Buffer.from(viaGrpc.data).equals(Buffer.from(data))).toBe(true);
      expect(remote.stats()).toMatchObject({ shmReads: 0, remoteReads: 1 });
      expect(metric(await svc.scrape(), 'diffmesh_tensor_calls_total', { method: 'Get' })).toBe(1);
    } finally {
      await local.close();
      await remote.close();
    }
    expect(await svc.stop()).toBe(0);
    expect(existsSync(shmDir)).toBe(false);
  });

  it.skipIf(!natsBinary)('registers in NATS as tensor-svc and leaves on SIGTERM', async () => {
    const nats = await startNatsServer();
    const discovery = await createDiscovery({ backend: 'nats', url: nats.url, pollIntervalMs: 200 }, silentLogger());
    try {
      const nodeId = `nats-${process.pid}`;
      const svc = await startProcess(
        {
          DIFFMESH_TENSOR_NODE_ID: nodeId,
          DIFFMESH_TENSOR_SHM_DIR: path.join(root, 'nats-shm'),
          DIFFMESH_TENSOR_SPILL_DIR: path.join(root, 'nats-spill'),
          DIFFMESH_TENSOR_NATS_URL: nats.url,
        },
        path.join(root, 'nats-shm'),
      );
      await expect.poll(async () => (await discovery.instances({ name: 'tensor-svc' })).length, { timeout: 10_000 }).toBe(1);
      const [inst] = await discovery.instances({ name: 'tensor-svc' });
      expect(inst).toMatchObject({
        id: `tensor-svc-${nodeId}`,
        stage: 'tensor',
        nodeId,
        grpcAddress: svc.address,
        tensorAddress: svc.address,
        capacity: 0,
      });
      expect(inst.metadata.shm_dir).toBe(path.join(root, 'nats-shm'));
      expect(await svc.stop()).toBe(0);
      await expect.poll(async () => (await discovery.instances({ name: 'tensor-svc' })).length, { timeout: 10_000 }).toBe(0);
    } finally {
      await discovery.close();
      await nats.stop();
    }
  });

  it('exits with status 2 and names the field on bad configuration', async () => {
    const child = spawn(process.execPath, [MAIN], {
      env: { ...process.env, DIFFMESH_TENSOR_CHUNK_BYTES: '12' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain('chunkBytes (from env DIFFMESH_TENSOR_CHUNK_BYTES)');
  });
});
