/**
 * Tensor transfer benchmark: 64 MiB between two Node processes on loopback, in one run.
 *
 *   (i)   raw `net` socket, both directions — the ceiling;
 *   (ii)  tensor-svc Put and Get over gRPC (a client on another node id);
 *   (iii) the same-node path: Put over gRPC, Get from shared memory;
 *   (iv)  the durable stores: redis (a redis-server process) and S3 (an s3rver process), Put
 *         and Get from a client in this process, as a stage with no tensor-svc uses them.
 *
 * Prints MB/s (10^6 bytes per second; medians of several repetitions after a warm-up) and
 * the ratios tensor-svc / raw TCP and shared memory / gRPC. Targets are reported, not
 * asserted: run-to-run noise on shared machines is ±20%.
 *
 * This file is also the peer process of the raw-socket measurement:
 * `node bench/dist/tensor.js peer [HOST]` serves raw bytes on a port of HOST (default loopback).
 */
import { isMainThread } from 'node:worker_threads';
import { spawn, type ChildProcess } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  RemoteTensorStore,
  S3TensorStore,
  TensorServiceClient,
  openDurableStore,
  parseDurableLocation,
  type DurableStore,
  type S3Location,
} from '@diffmesh/tensor-client';
import {
  RedisServerNotFoundError,
  startRedisServer,
  startS3Server,
  type RunningRedisServer,
  type RunningS3Server,
} from '@diffmesh/testing';

const MiB = 1024 * 1024;

/** Options of {@link runTensorBench}. */
export interface TensorBenchOptions {
  /** Bytes per transfer. Default 64 MiB. */
  sizeBytes?: number;
  /** Timed repetitions per path (after one warm-up). Default 5. */
  reps?: number;
  /** tensor-svc chunk size (Get) and client chunk size (Put). Default 2 MiB. */
  chunkBytes?: number;
  /** Where progress lines go. Default stderr. */
  progress?: (line: string) => void;
}

/** Medians in MB/s. */
export interface TensorBenchResult {
  sizeBytes: number;
  reps: number;
  /** Into a fresh buffer per transfer, as every tensor read (the like-for-like baseline). */
  rawDownload: number;
  /** Into one buffer reused across transfers (the socket's ceiling). */
  rawDownloadReused: number;
  /** The receiver stores into a fresh buffer per transfer. */
  rawUpload: number;
  grpcPut: number;
  /** RemoteTensorStore.get: into a fresh buffer of the object's size. */
  grpcGet: number;
  /** TensorServiceClient.get into one reused buffer (the transport alone). */
  grpcGetReused: number;
  grpcEndToEnd: number;
  /** RemoteTensorStore.put on the service's node: the bytes go through a file in shared memory. */
  shmPut: number;
  shmGet: number;
  shmEndToEnd: number;
  /** RedisTensorStore against a redis-server process; undefined when redis-server is not installed. */
  redis?: DurableRates;
  /** S3TensorStore against an s3rver process (multipart upload, streamed get). */
  s3: DurableRates;
  /** Each the median of the per-repetition ratios. */
  ratios: {
    grpcGetOverRaw: number;
    grpcGetOverRawReused: number;
    grpcPutOverRaw: number;
    shmGetOverGrpcGet: number;
    shmPutOverGrpcPut: number;
    shmEndToEndOverGrpcEndToEnd: number;
    redisEndToEndOverGrpcEndToEnd?: number;
    s3EndToEndOverGrpcEndToEnd: number;
  };
}

/** Put, Get and both of a durable store, MB/s. */
export interface DurableRates {
  put: number;
  get: number;
  endToEnd: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function mbps(bytes: number, ms: number): number {
  return bytes / 1e6 / (ms / 1000);
}

function pattern(size: number): Buffer {
  const buf = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i += 4) buf.writeUInt32LE((i * 2654435761) >>> 0, i);
  return buf;
}

/**
 * Spawns `node <entry> ...args` (under `launcher`, e.g. `ip netns exec NODE`) and resolves with
 * the first stdout match of `ready`. Its stdin is a pipe.
 */
export function spawnReady(
  entry: string,
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  launcher: string[] = [],
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const command = [...launcher, process.execPath, entry, ...args];
  const child = spawn(command[0], command.slice(1), { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${entry} did not start:\n${stderr}`)), 20_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${entry} exited with ${code}:\n${stderr}`));
    });
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m });
      }
    });
  });
}

export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

// ---- raw socket: peer side ----

/**
 * Serves raw transfers: a connection sends `G<size as 8 bytes>` to receive `size` bytes,
 * or `P<size>` followed by `size` bytes, answered with one byte once all arrived.
 */
async function runPeer(host: string): Promise<void> {
  let payload: Buffer = Buffer.alloc(0);
  let sink: Buffer = Buffer.alloc(0);
  const server = createServer((sock) => {
    let head: Buffer = Buffer.alloc(0);
    let mode: 'G' | 'P' | undefined;
    let size = 0;
    let got = 0;
    sock.on('data', (d: Buffer) => {
      if (!mode) {
        head = Buffer.concat([head, d]);
        if (head.length < 9) return;
        mode = head.toString('latin1', 0, 1) as 'G' | 'P';
        size = Number(head.readBigUInt64LE(1));
        d = head.subarray(9);
        if (mode === 'G') {
          if (payload.length !== size) payload = pattern(size);
          sock.end(payload);
          return;
        }
        // A fresh buffer per transfer, as a store receiving a new object has.
        sink = Buffer.allocUnsafe(size);
      }
      if (mode === 'P') {
        d.copy(sink, got);
        got += d.length;
        if (got >= size) sock.end(Buffer.from('k'));
      }
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const addr = server.address();
  process.stdout.write(`peer listening on ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
  process.on('SIGTERM', () => process.exit(0));
}

// ---- raw socket: measuring side ----

/** Downloads `size` bytes from the peer at `host:port` into `into`, or into a fresh buffer allocated inside the timing. */
export function rawGet(port: number, size: number, into?: Buffer, host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const dest = into ?? Buffer.allocUnsafe(size);
    const sock: Socket = connect(port, host, () => {
      const head = Buffer.alloc(9);
      head.write('G', 0, 'latin1');
      head.writeBigUInt64LE(BigInt(size), 1);
      sock.write(head);
    });
    let got = 0;
    sock.on('data', (d: Buffer) => {
      d.copy(dest, got);
      got += d.length;
    });
    sock.on('end', () => (got === size ? resolve(performance.now() - t0) : reject(new Error(`raw get: ${got} bytes`))));
    sock.on('error', reject);
  });
}

function rawPut(port: number, data: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const sock: Socket = connect(port, '127.0.0.1', () => {
      const head = Buffer.alloc(9);
      head.write('P', 0, 'latin1');
      head.writeBigUInt64LE(BigInt(data.length), 1);
      sock.write(head);
      sock.write(data);
    });
    sock.on('data', () => undefined);
    sock.on('end', () => resolve(performance.now() - t0));
    sock.on('error', reject);
  });
}

// ---- the benchmark ----

/** Runs the three measurements and returns medians and ratios. */
export async function runTensorBench(opts: TensorBenchOptions = {}): Promise<TensorBenchResult> {
  const size = opts.sizeBytes ?? 64 * MiB;
  const reps = opts.reps ?? 5;
  const chunkBytes = opts.chunkBytes ?? 2 * MiB;
  const progress = opts.progress ?? ((line: string) => process.stderr.write(`${line}\n`));
  const data = pattern(size);
  const children: ChildProcess[] = [];
  const work = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-tensor-'));
  let redisServer: RunningRedisServer | undefined;
  let s3Server: RunningS3Server | undefined;
  try {
    // The durable stores' servers run as their own processes, as in a deployment.
    redisServer = await startRedisServer().catch((err: unknown) => {
      if (err instanceof RedisServerNotFoundError) {
        progress(`redis: skipped (${err.message})`);
        return undefined;
      }
      throw err;
    });
    s3Server = await startS3Server({ buckets: ['bench'] });
    // Both peers start first; each repetition then measures every path back to back, so
    // load from elsewhere on the machine affects all of them alike. Ratios are taken per
    // repetition, then the median.
    const peer = await spawnReady(fileURLToPath(import.meta.url), ['peer'], {}, /peer listening on (\d+)\n/);
    children.push(peer.child);
    const port = Number(peer.match[1]);
    const nodeId = `bench-${process.pid}`;
    const entry = fileURLToPath(import.meta.resolve('@diffmesh/tensor-svc/main'));
    const svc = await spawnReady(
      entry,
      [],
      {
        DIFFMESH_TENSOR_NODE_ID: nodeId,
        DIFFMESH_TENSOR_CHUNK_BYTES: String(chunkBytes),
        DIFFMESH_TENSOR_MEMORY_CAPACITY_BYTES: String(Math.max(4 * size, 256 * MiB)),
        DIFFMESH_TENSOR_SPILL_DIR: path.join(work, 'spill'),
        DIFFMESH_TENSOR_LOG_LEVEL: 'warn',
      },
      /tensor-svc listening on (\S+)\n/,
    );
    children.push(svc.child);
    const address = svc.match[1];
    // A client on another node (every read over gRPC) and one on the service's node.
    const remote = new RemoteTensorStore({ address, nodeId: `${nodeId}-elsewhere`, chunkBytes });
    const local = new RemoteTensorStore({ address, nodeId, chunkBytes });
    const transport = new TensorServiceClient(address, { chunkBytes });
    const redisStore: DurableStore | undefined = redisServer ? openDurableStore(`${redisServer.url}/0/bench`) : undefined;
    const s3Store = new S3TensorStore({
      location: parseDurableLocation('s3://bench/tensors') as S3Location,
      endpoint: s3Server.endpoint,
      region: s3Server.region,
      client: { credentials: { accessKeyId: s3Server.accessKeyId, secretAccessKey: s3Server.secretAccessKey } },
    });
    const shape = [size / 4];
    const reused = Buffer.allocUnsafe(size);
    const m = {
      rawDown: [] as number[],
      rawDownReused: [] as number[],
      rawUp: [] as number[],
      put: [] as number[],
      get: [] as number[],
      getReused: [] as number[],
      e2e: [] as number[],
      shmPut: [] as number[],
      shmGet: [] as number[],
      shmE2e: [] as number[],
      redisPut: [] as number[],
      redisGet: [] as number[],
      redisE2e: [] as number[],
      s3Put: [] as number[],
      s3Get: [] as number[],
      s3E2e: [] as number[],
    };
    /** Put then Get of one object through `store`, MB/s each and both. */
    const durableRound = async (store: DurableStore, i: number): Promise<[number, number, number]> => {
      const t0 = performance.now();
      const ref = await store.put({ requestId: `bench${i}`, name: 'latents', data, shape, dtype: 'float32' });
      const t1 = performance.now();
      const got = await store.get(ref);
      const t2 = performance.now();
      if (got.data.byteLength !== size || got.ref.checksum !== ref.checksum)
        throw new Error(`${store.kind} round trip returned other bytes`);
      await store.delete(ref);
      return [mbps(size, t1 - t0), mbps(size, t2 - t1), mbps(size, t2 - t0)];
    };
    try {
      for (let i = 0; i <= reps; i++) {
        const rawDownReused = mbps(size, await rawGet(port, size, reused));
        const rawDown = mbps(size, await rawGet(port, size));
        const rawUp = mbps(size, await rawPut(port, data));

        let t0 = performance.now();
        let ref = await remote.put({ requestId: `bench${i}`, name: 'latents', data, shape, dtype: 'float32' });
        let t1 = performance.now();
        const got = await remote.get(ref);
        let t2 = performance.now();
        if (got.data.byteLength !== size || got.ref.checksum !== ref.checksum) throw new Error('gRPC round trip returned other bytes');
        const t3 = performance.now();
        await transport.get(ref.objectId, { into: reused, ...(ref.capability ? { capability: ref.capability } : {}) });
        const getReused = mbps(size, performance.now() - t3);
        await remote.delete(ref);
        const put = mbps(size, t1 - t0);
        const get = mbps(size, t2 - t1);
        const e2e = mbps(size, t2 - t0);

        t0 = performance.now();
        ref = await local.put({ requestId: `bench${i}`, name: 'latents', data, shape, dtype: 'float32' });
        t1 = performance.now();
        const viaShm = await local.get(ref);
        t2 = performance.now();
        if (viaShm.data.byteLength !== size) throw new Error('shared-memory read returned other bytes');
        await local.delete(ref);
        const redisRates = redisStore ? await durableRound(redisStore, i) : undefined;
        const s3Rates = await durableRound(s3Store, i);
        if (i === 0) continue; // warm-up
        if (redisRates) {
          m.redisPut.push(redisRates[0]);
          m.redisGet.push(redisRates[1]);
          m.redisE2e.push(redisRates[2]);
        }
        m.s3Put.push(s3Rates[0]);
        m.s3Get.push(s3Rates[1]);
        m.s3E2e.push(s3Rates[2]);
        m.rawDown.push(rawDown);
        m.rawDownReused.push(rawDownReused);
        m.rawUp.push(rawUp);
        m.put.push(put);
        m.get.push(get);
        m.getReused.push(getReused);
        m.e2e.push(e2e);
        m.shmPut.push(mbps(size, t1 - t0));
        m.shmGet.push(mbps(size, t2 - t1));
        m.shmE2e.push(mbps(size, t2 - t0));
        progress(
          `rep ${i}/${reps}: raw ${rawDown.toFixed(0)}/${rawUp.toFixed(0)}, gRPC put ${put.toFixed(0)} get ${get.toFixed(0)}, shm put ${m.shmPut[i - 1].toFixed(0)} get ${m.shmGet[i - 1].toFixed(0)}` +
            `${redisRates ? `, redis put ${redisRates[0].toFixed(0)} get ${redisRates[1].toFixed(0)}` : ''}, s3 put ${s3Rates[0].toFixed(0)} get ${s3Rates[1].toFixed(0)} MB/s`,
        );
      }
      const localStats = local.stats();
      const remoteStats = remote.stats();
      if (localStats.shmReads !== reps + 1 || localStats.shmWrites !== reps + 1 || remoteStats.shmReads + remoteStats.shmWrites !== 0) {
        throw new Error(
          `expected every same-node transfer through shared memory and no other: ${JSON.stringify({ localStats, remoteStats })}`,
        );
      }
    } finally {
      transport.close();
      await remote.close();
      await local.close();
      await redisStore?.close();
      await s3Store.close();
    }
    const ratio = (a: number[], b: number[]): number => median(a.map((x, i) => x / b[i]));
    return {
      sizeBytes: size,
      reps,
      rawDownload: median(m.rawDown),
      rawDownloadReused: median(m.rawDownReused),
      rawUpload: median(m.rawUp),
      grpcPut: median(m.put),
      grpcGet: median(m.get),
      grpcGetReused: median(m.getReused),
      grpcEndToEnd: median(m.e2e),
      shmPut: median(m.shmPut),
      shmGet: median(m.shmGet),
      shmEndToEnd: median(m.shmE2e),
      ...(redisServer ? { redis: { put: median(m.redisPut), get: median(m.redisGet), endToEnd: median(m.redisE2e) } } : {}),
      s3: { put: median(m.s3Put), get: median(m.s3Get), endToEnd: median(m.s3E2e) },
      ratios: {
        grpcGetOverRaw: ratio(m.get, m.rawDown),
        grpcGetOverRawReused: ratio(m.getReused, m.rawDownReused),
        grpcPutOverRaw: ratio(m.put, m.rawUp),
        shmGetOverGrpcGet: ratio(m.shmGet, m.get),
        shmPutOverGrpcPut: ratio(m.shmPut, m.put),
        shmEndToEndOverGrpcEndToEnd: ratio(m.shmE2e, m.e2e),
        ...(redisServer ? { redisEndToEndOverGrpcEndToEnd: ratio(m.redisE2e, m.e2e) } : {}),
        s3EndToEndOverGrpcEndToEnd: ratio(m.s3E2e, m.e2e),
      },
    };
  } finally {
    await Promise.all(children.map(stopChild));
    await Promise.all([redisServer?.stop(), s3Server?.stop()]);
    await rm(work, { recursive: true, force: true });
  }
}

/** The result as a Markdown table with the targets. */
export function formatTensorBench(r: TensorBenchResult): string {
  const f = (n: number): string => n.toFixed(0).padStart(6);
  const x = (n: number): string => `${n.toFixed(2)}×`;
  const ok = (v: boolean): string => (v ? 'met' : 'NOT met');
  return [
    `tensor transfer, ${(r.sizeBytes / MiB).toFixed(0)} MiB between two processes on loopback (MB/s = 10^6 B/s, medians of ${r.reps} repetitions; ratios per repetition)`,
    'every receiver stores into a freshly allocated buffer or file, except the "reused buffer" row',
    '',
    '| path | MB/s |',
    '|---|---:|',
    `| raw TCP, download | ${f(r.rawDownload)} |`,
    `| raw TCP, download into a reused buffer | ${f(r.rawDownloadReused)} |`,
    `| raw TCP, upload | ${f(r.rawUpload)} |`,
    `| tensor-svc Put (gRPC) | ${f(r.grpcPut)} |`,
    `| tensor-svc Get (gRPC) | ${f(r.grpcGet)} |`,
    `| tensor-svc Get (gRPC) into a reused buffer | ${f(r.grpcGetReused)} |`,
    `| tensor-svc Put + Get, end to end | ${f(r.grpcEndToEnd)} |`,
    `| same node: Put through shared memory | ${f(r.shmPut)} |`,
    `| same node: Get from shared memory | ${f(r.shmGet)} |`,
    `| same node: Put + Get, both through shared memory, end to end | ${f(r.shmEndToEnd)} |`,
    ...(r.redis
      ? [
          `| redis (RedisTensorStore → redis-server): Put | ${f(r.redis.put)} |`,
          `| redis: Get | ${f(r.redis.get)} |`,
          `| redis: Put + Get, end to end | ${f(r.redis.endToEnd)} |`,
        ]
      : ['| redis | skipped: redis-server not installed |']),
    `| S3 (S3TensorStore → s3rver, multipart): Put | ${f(r.s3.put)} |`,
    `| S3: Get | ${f(r.s3.get)} |`,
    `| S3: Put + Get, end to end | ${f(r.s3.endToEnd)} |`,
    '',
    '| ratio | value | target |',
    '|---|---:|---|',
    `| gRPC Get / raw TCP | ${x(r.ratios.grpcGetOverRaw)} | ≥ 0.50× (${ok(r.ratios.grpcGetOverRaw >= 0.5)}) |`,
    `| gRPC Get / raw TCP, both into a reused buffer | ${x(r.ratios.grpcGetOverRawReused)} | (reported) |`,
    `| gRPC Put / raw TCP | ${x(r.ratios.grpcPutOverRaw)} | ≥ 0.50× (${ok(r.ratios.grpcPutOverRaw >= 0.5)}) |`,
    `| shared-memory Get / gRPC Get | ${x(r.ratios.shmGetOverGrpcGet)} | ≥ 2× (${ok(r.ratios.shmGetOverGrpcGet >= 2)}) |`,
    `| shared-memory Put / gRPC Put | ${x(r.ratios.shmPutOverGrpcPut)} | (reported) |`,
    `| same-node end to end / gRPC end to end | ${x(r.ratios.shmEndToEndOverGrpcEndToEnd)} | (reported) |`,
    ...(r.ratios.redisEndToEndOverGrpcEndToEnd !== undefined
      ? [`| redis end to end / gRPC end to end | ${x(r.ratios.redisEndToEndOverGrpcEndToEnd)} | (reported) |`]
      : []),
    `| S3 end to end / gRPC end to end | ${x(r.ratios.s3EndToEndOverGrpcEndToEnd)} | (reported) |`,
  ].join('\n');
}

/** True when the module at `moduleUrl` is the script this process runs (`node <it> …`). */
export function isEntryPoint(moduleUrl: string): boolean {
  try {
    // A runner thread loaded from a bundle sees the same argv: it is never the entry point.
    return isMainThread && !!process.argv[1] && pathToFileURL(realpathSync(process.argv[1])).href === moduleUrl;
  } catch {
    return false;
  }
}

if (isEntryPoint(import.meta.url) && process.argv[2] === 'peer') {
  runPeer(process.argv[3] ?? '127.0.0.1').catch((err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(1);
  });
}
