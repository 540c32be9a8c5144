/**
 * Cross-node transfer benchmark: what a tensor read costs when it crosses a real network
 * stack instead of loopback, in one run. Two nodes are network namespaces joined by veth
 * links through a bridge (`createNodeNetwork`; no emulated latency). node1 runs tensor-svc
 * (listening on every interface, advertising node1's address) and a raw-socket peer; a
 * reader process on node1 reads over loopback, one on node2 over the veth path:
 *
 *   - tensor-svc `Get` of one 64 MiB object (RemoteTensorStore on another node id, into a
 *     fresh buffer, as a stage reads its input);
 *   - the same bytes over a raw `net` socket (what the path itself allows).
 *
 * Each repetition times all four back to back; ratios are taken per repetition, then the
 * median. Needs root and iproute2; elsewhere the section says why it is skipped.
 *
 * This file is also the reader process: `node bench/dist/cross-node.js reader NODE_ID` reads
 * commands on stdin (`get ADDRESS REF SIZE`, REF the object's ObjectRef as base64url JSON, so the
 * read carries its capability as a stage's does; `raw HOST PORT SIZE`) and answers each with the
 * milliseconds it took.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ObjectRef } from '@diffmesh/core';
import { RemoteTensorStore } from '@diffmesh/tensor-client';
import { createNodeNetwork, netnsSupport, type NodeNetwork } from '@diffmesh/testing';
import { isEntryPoint, rawGet, spawnReady, stopChild } from './tensor.js';

const MiB = 1024 * 1024;

export interface CrossNodeBenchOptions {
  /** Bytes per transfer. Default 64 MiB. */
  sizeBytes?: number;
  /** Timed repetitions (after one warm-up). Default 5. */
  reps?: number;
  /** Where progress lines go. Default stderr. */
  progress?: (line: string) => void;
}

/** Medians in MB/s (10^6 B/s), or why the section could not run. */
export type CrossNodeBenchResult =
  | {
      skipped?: undefined;
      sizeBytes: number;
      reps: number;
      subnet: string;
      get: { loopback: number; veth: number; ratio: number };
      raw: { loopback: number; veth: number; ratio: number };
    }
  | { skipped: string };

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const mbps = (bytes: number, ms: number): number => bytes / 1e6 / (ms / 1000);

/** A reader process: sends one command line, resolves with its answer line. */
function reader(child: ChildProcess): (command: string) => Promise<string> {
  const waiting: Array<(line: string) => void> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => waiting.shift()?.(line));
  return (command) =>
    new Promise((resolve, reject) => {
      waiting.push((line) => (line.startsWith('error ') ? reject(new Error(`reader: ${line}`)) : resolve(line)));
      child.stdin!.write(`${command}\n`);
    });
}

/** Runs the section; `{ skipped }` when network namespaces are not available here. */
export async function runCrossNodeBench(opts: CrossNodeBenchOptions = {}): Promise<CrossNodeBenchResult> {
  const support = await netnsSupport();
  if (!support.available) return { skipped: support.reason };
  const size = opts.sizeBytes ?? 64 * MiB;
  const reps = opts.reps ?? 5;
  const progress = opts.progress ?? ((line: string) => process.stderr.write(`${line}\n`));
  const children: ChildProcess[] = [];
  const work = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-cross-node-'));
  let net: NodeNetwork | undefined;
  try {
    net = await createNodeNetwork({ nodes: 2 });
    const [n1, n2] = net.nodes;
    const nodeId = `bench-${n1.netns}`;
    const svc = await spawnReady(
      fileURLToPath(import.meta.resolve('@diffmesh/tensor-svc/main')),
      ['--listen', '0.0.0.0:0', '--advertise-address', n1.address],
      {
        DIFFMESH_TENSOR_NODE_ID: nodeId,
        DIFFMESH_TENSOR_MEMORY_CAPACITY_BYTES: String(Math.max(4 * size, 256 * MiB)),
        DIFFMESH_TENSOR_SPILL_DIR: path.join(work, 'spill'),
        DIFFMESH_TENSOR_LOG_LEVEL: 'warn',
      },
      /tensor-svc listening on (\S+)\n/,
      n1.launcher,
    );
    children.push(svc.child);
    const vethAddress = svc.match[1];
    const loopbackAddress = `127.0.0.1:${vethAddress.slice(vethAddress.lastIndexOf(':') + 1)}`;
    const tensorFile = fileURLToPath(import.meta.resolve('./tensor.js'));
    const peer = await spawnReady(tensorFile, ['peer', '0.0.0.0'], {}, /peer listening on (\d+)\n/, n1.launcher);
    children.push(peer.child);
    const peerPort = peer.match[1];
    const self = fileURLToPath(import.meta.url);
    const local = await spawnReady(self, ['reader', `${nodeId}-reader`], {}, /reader ready\n/, n1.launcher);
    children.push(local.child);
    const remote = await spawnReady(self, ['reader', `${nodeId}-reader`], {}, /reader ready\n/, n2.launcher);
    children.push(remote.child);
    const onNode1 = reader(local.child);
    const onNode2 = reader(remote.child);

    // One object in node1's tensor-svc, put from this process (through the host's link).
    const writer = new RemoteTensorStore({ address: vethAddress, nodeId: `${nodeId}-writer` });
    const data = Buffer.alloc(size, 7);
    const ref = await writer.put({ requestId: 'bench', name: 'latents', data, shape: [size / 4], dtype: 'float32' });
    await writer.close();

    // The reader gets the whole ref (its capability too), owned at the address it reads from.
    const refAt = (address: string): string => Buffer.from(JSON.stringify({ ...ref, ownerAddress: address })).toString('base64url');
    const m = { getLoop: [] as number[], getVeth: [] as number[], rawLoop: [] as number[], rawVeth: [] as number[] };
    const time = async (ask: (c: string) => Promise<string>, command: string): Promise<number> => mbps(size, Number(await ask(command)));
    for (let i = 0; i <= reps; i += 1) {
      const rawLoop = await time(onNode1, `raw 127.0.0.1 ${peerPort} ${size}`);
      const rawVeth = await time(onNode2, `raw ${n1.address} ${peerPort} ${size}`);
      const getLoop = await time(onNode1, `get ${loopbackAddress} ${refAt(loopbackAddress)} ${size}`);
      const getVeth = await time(onNode2, `get ${vethAddress} ${refAt(vethAddress)} ${size}`);
      if (i === 0) continue; // warm-up
      m.rawLoop.push(rawLoop);
      m.rawVeth.push(rawVeth);
      m.getLoop.push(getLoop);
      m.getVeth.push(getVeth);
      progress(
        `rep ${i}/${reps}: Get loopback ${getLoop.toFixed(0)} veth ${getVeth.toFixed(0)}, raw TCP loopback ${rawLoop.toFixed(0)} veth ${rawVeth.toFixed(0)} MB/s`,
      );
    }
    const ratio = (a: number[], b: number[]): number => median(a.map((x, j) => x / b[j]));
    return {
      sizeBytes: size,
      reps,
      subnet: net.subnet,
      get: { loopback: median(m.getLoop), veth: median(m.getVeth), ratio: ratio(m.getVeth, m.getLoop) },
      raw: { loopback: median(m.rawLoop), veth: median(m.rawVeth), ratio: ratio(m.rawVeth, m.rawLoop) },
    };
  } finally {
    await Promise.all(children.map(stopChild));
    await net?.destroy();
    await rm(work, { recursive: true, force: true });
  }
}

/** The result as a Markdown table. */
export function formatCrossNodeBench(r: CrossNodeBenchResult): string {
  if (r.skipped !== undefined) return `cross-node: skipped (${r.skipped})`;
  const f = (n: number): string => n.toFixed(0).padStart(6);
  const x = (n: number): string => `${n.toFixed(2)}×`;
  return [
    `cross-node read of ${(r.sizeBytes / MiB).toFixed(0)} MiB from node1's tensor-svc: a reader on node1 over loopback vs one on node2 over veth links and a bridge (${r.subnet}, no emulated latency); MB/s = 10^6 B/s, medians of ${r.reps} repetitions, ratios per repetition`,
    '',
    '| path | loopback (same node) | veth (other node) | veth / loopback |',
    '|---|---:|---:|---:|',
    `| tensor-svc Get (gRPC, into a fresh buffer) | ${f(r.get.loopback)} | ${f(r.get.veth)} | ${x(r.get.ratio)} |`,
    `| raw TCP (into a fresh buffer) | ${f(r.raw.loopback)} | ${f(r.raw.veth)} | ${x(r.raw.ratio)} |`,
  ].join('\n');
}

/** The reader process (see the module comment). */
async function runReader(nodeId: string): Promise<void> {
  const stores = new Map<string, RemoteTensorStore>();
  const lines = createInterface({ input: process.stdin });
  process.stdout.write('reader ready\n');
  for await (const line of lines) {
    const [command, a, b, c] = line.trim().split(/\s+/);
    try {
      const t0 = performance.now();
      if (command === 'get') {
        let store = stores.get(a);
        if (!store) stores.set(a, (store = new RemoteTensorStore({ address: a, nodeId })));
        const got = await store.get(JSON.parse(Buffer.from(b, 'base64url').toString()) as ObjectRef);
        if (got.data.byteLength !== Number(c)) throw new Error(`got ${got.data.byteLength} bytes`);
      } else if (command === 'raw') {
        await rawGet(Number(b), Number(c), undefined, a);
      } else throw new Error(`unknown command "${command}"`);
      process.stdout.write(`${performance.now() - t0}\n`);
    } catch (err) {
      process.stdout.write(`error ${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
  for (const s of stores.values()) await s.close();
}

if (isEntryPoint(import.meta.url) && process.argv[2] === 'reader') {
  runReader(process.argv[3] ?? 'bench-reader').catch((err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(1);
  });
}
