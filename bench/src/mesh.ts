import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GenerateResponse__Output } from '@diffmesh/protos';
import { HopClient } from './transport-floor.js';
import { Supervisor, startNatsServer, type ManagedProcess } from '@diffmesh/testing';
import { serviceEntry, startEmbedded, startLocalMesh, waitForInstance } from '@diffmesh/cli';
import { schedulerStub, type SchedulerStub, SchedulerSession } from '@diffmesh/client';
import { defaultModelsRoot } from '@diffmesh/models';
import { createDiscovery, type Discovery } from '@diffmesh/discovery';
import { paramsToWire, silentLogger, type GenerationParams } from '@diffmesh/core';

/** Latency percentile of sorted samples. */
export function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * One Generate call; returns the milliseconds until the `completed` event arrived, when the
 * client holds its result (the stream's status trailer follows in a later packet, as grpc-js
 * sends it after the last message). The promise settles when the stream has ended too.
 */
function timedGenerate(client: SchedulerStub, model: string, params: Partial<GenerationParams>): Promise<number> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const call = client.Generate({ model, params: paramsToWire(params), priority: 0 });
    let completedAt = 0;
    call.on('data', (msg: GenerateResponse__Output) => {
      for (const e of msg.events) {
        if (e.completed) completedAt = performance.now();
        if (e.failed) reject(new Error(`request failed: ${e.failed.error?.message}`));
      }
    });
    call.on('error', reject);
    call.on('end', () => (completedAt ? resolve(completedAt - start) : reject(new Error('request ended without completing'))));
  });
}

/** One request on a Session stream; returns the milliseconds until its `completed` event arrived. */
export function timedSessionRequest(session: SchedulerSession, model: string, params: Partial<GenerationParams>): Promise<number> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    session.start(
      { model, params: paramsToWire(params), priority: 0 },
      {
        event: (e) => {
          if (e.completed) resolve(performance.now() - start);
          else if (e.failed) reject(new Error(`request failed: ${e.failed.error?.message}`));
          else if (e.cancelled) reject(new Error('request cancelled'));
        },
        error: reject,
      },
    );
  });
}

/**
 * How the bench's clients send requests: a Generate call each, messages on one Session
 * stream, or (`floor`) the bare grpc-js relay of `transport-floor.ts` in the same shape.
 */
export type OverheadMode = 'generate' | 'session' | 'floor';

export interface OverheadRow {
  mode: OverheadMode;
  clients: number;
  requests: number;
  p50: number;
  p99: number;
  perSecond: number;
  /** CPU milliseconds per request, per process (bench client included); empty where /proc is missing. */
  cpuMsPerRequest: Record<string, number>;
}

/** CPU time (user + system) of a process in ms, from /proc; undefined off Linux. */
function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): utime is the 14th field, stime the 15th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return undefined;
  }
}

/** CPU ms of each named process (and of this one, as `client`). */
export function cpuSnapshot(pids: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  const self = process.cpuUsage();
  out.client = (self.user + self.system) / 1000;
  for (const [name, pid] of Object.entries(pids)) {
    const ms = processCpuMs(pid);
    if (ms !== undefined) out[name] = ms;
  }
  return out;
}

/** Tasks of one `bench/noop` request: one per stage. */
export const NOOP_TASKS_PER_REQUEST = 3;

/** The 3-stage plan whose stages do nothing (`src/noop-stage.ts`), as the scheduler's registry. */
const NOOP_PLANS = [
  'version: 1',
  'plans:',
  '  - model: bench/noop',
  '    modalities: [text-to-image]',
  '    stages:',
  '      - { name: text_encoding, pool: noop-enc }',
  '      - { name: denoising, pool: noop-dit }',
  '      - { name: vae_decoding, pool: noop-vae }',
  '    defaults: { width: 64, height: 64, numFrames: 1, steps: 1, guidanceScale: 1, fps: 8 }',
  '    constraints: { sizeMultiple: 8, maxWidth: 64, maxHeight: 64, maxFrames: 1 }',
  '',
].join('\n');

/**
 * Starts a scheduler serving `bench/noop` (with `schedulerArgs`, e.g. its queue) and one no-op
 * stage process per pool, each its own process under `supervisor`; resolves once discovery
 * sees every stage. Returns the scheduler and the pid of each process by name.
 */
export async function startNoopPlan(
  supervisor: Supervisor,
  discovery: Discovery,
  natsUrl: string,
  dir: string,
  schedulerArgs: string[] = [],
): Promise<{ sched: ManagedProcess; pids: Record<string, number> }> {
  const plans = path.join(dir, 'plans.yaml');
  await writeFile(plans, NOOP_PLANS);
  // DIFFMESH_BENCH_CPU_PROF=DIR: the scheduler runs under `node --cpu-prof` and writes its profile into DIR when stopped.
  const profDir = process.env.DIFFMESH_BENCH_CPU_PROF;
  const sched = await supervisor.start({
    name: 'scheduler',
    // DIFFMESH_BENCH_SCHEDULER_ENTRY=FILE: another build's scheduler (its dist/main.js), for before/after runs.
    entry: process.env.DIFFMESH_BENCH_SCHEDULER_ENTRY || serviceEntry('scheduler'),
    ...(profDir ? { launcher: ['/bin/sh', '-c', 'exec "$0" --cpu-prof --cpu-prof-dir="$DIFFMESH_BENCH_CPU_PROF" "$@"'] } : {}),
    args: ['--nats', natsUrl, '--plans', plans, '--log-level', 'warn', '--max-in-flight', '10000', ...schedulerArgs],
    readyPrefix: 'scheduler listening on ',
  });
  const pids: Record<string, number> = { scheduler: sched.pid };
  const noop = fileURLToPath(new URL('./noop-stage.js', import.meta.url));
  for (const [stage, pool] of [
    ['text_encoding', 'noop-enc'],
    ['denoising', 'noop-dit'],
    ['vae_decoding', 'noop-vae'],
  ] as const) {
    const stageProc = await supervisor.start({
      name: pool,
      entry: noop,
      args: [
        '--stage',
        stage,
        '--pool',
        pool,
        '--instance-id',
        pool,
        '--capacity',
        '64',
        '--nats',
        natsUrl,
        '--models-dirs',
        dir,
        '--log-level',
        'warn',
      ],
      readyPrefix: 'noop-stage listening on ',
    });
    pids[pool] = stageProc.pid;
    await waitForInstance(discovery, pool, 15_000);
  }
  return { sched, pids };
}

/** The warm-up of the sections that time many small requests. */
export interface WarmupOptions {
  /** Requests each of the 8 warm-up clients sends before timing starts (sections pick their default). */
  warmupPerClient?: number;
}

/**
 * (a) Scheduler overhead: a 3-stage plan whose stages do nothing, each stage its own
 * process, the scheduler its own process, clients calling Generate over gRPC on loopback.
 */
export async function runSchedulerOverhead(requests = 400, opts: WarmupOptions = {}): Promise<OverheadRow[]> {
  const warmup = opts.warmupPerClient ?? 250;
  const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-'));
  const log = silentLogger();
  const nats = await startNatsServer({ log });
  const supervisor = new Supervisor({ logPath: (n) => path.join(dir, `${n}.log`) });
  const discovery = await createDiscovery({ backend: 'nats', url: nats.url }, log);
  try {
    const { sched, pids } = await startNoopPlan(supervisor, discovery, nats.url, dir);
    const client = schedulerStub(sched.address);
    const session = new SchedulerSession(client);
    const params = { prompt: 'noop' };
    const run: Record<'generate' | 'session', () => Promise<number>> = {
      generate: () => timedGenerate(client, 'bench/noop', params),
      session: () => timedSessionRequest(session, 'bench/noop', params),
    };
    // Warm-up: long enough for V8 to optimise the hot paths of every process, as in a server that has been up a while.
    for (const mode of ['generate', 'session'] as const) {
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < warmup; i += 1) await run[mode]();
        }),
      );
    }
    const rows: OverheadRow[] = [];
    for (const [mode, clients] of [
      ['generate', 1],
      ['generate', 8],
      ['session', 1],
      ['session', 8],
    ] as const) {
      const per = Math.ceil(requests / clients);
      const samples: number[] = [];
      const cpuBefore = cpuSnapshot(pids);
      const start = performance.now();
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = 0; i < per; i += 1) samples.push(await run[mode]());
        }),
      );
      rows.push(overheadRow(mode, clients, samples, (performance.now() - start) / 1000, cpuBefore, cpuSnapshot(pids)));
    }
    await session.close();
    client.close();
    rows.push(...(await measureFloor(supervisor, requests, warmup)));
    return rows;
  } finally {
    await supervisor.stopAll(5000);
    await discovery.close();
    await nats.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

function overheadRow(
  mode: OverheadMode,
  clients: number,
  samples: number[],
  elapsedS: number,
  cpuBefore: Record<string, number>,
  cpuAfter: Record<string, number>,
): OverheadRow {
  const cpuMsPerRequest = Object.fromEntries(
    Object.entries(cpuAfter)
      .filter(([name]) => cpuBefore[name] !== undefined)
      .map(([name, ms]) => [name, (ms - cpuBefore[name]) / samples.length]),
  );
  samples.sort((a, b) => a - b);
  return {
    mode,
    clients,
    requests: samples.length,
    p50: pct(samples, 50),
    p99: pct(samples, 99),
    perSecond: samples.length / elapsedS,
    cpuMsPerRequest,
  };
}

/** The transport floor (see `transport-floor.ts`): a bare grpc-js relay and three echo processes, timed like the mesh. */
async function measureFloor(supervisor: Supervisor, requests: number, warmup: number): Promise<OverheadRow[]> {
  const entry = fileURLToPath(new URL('./transport-floor.js', import.meta.url));
  const pids: Record<string, number> = {};
  const echoes: string[] = [];
  for (const name of ['floor-enc', 'floor-dit', 'floor-vae']) {
    const p = await supervisor.start({ name, entry, args: ['echo'], readyPrefix: 'transport-floor listening on ' });
    pids[name] = p.pid;
    echoes.push(p.address);
  }
  const relay = await supervisor.start({
    name: 'floor-relay',
    entry,
    args: ['relay', ...echoes],
    readyPrefix: 'transport-floor listening on ',
  });
  pids['floor-relay'] = relay.pid;
  const hop = new HopClient(relay.address);
  let nextId = 0;
  // About the size of a request message; the relay forwards it as it is.
  const body = Buffer.alloc(256, 1);
  const once = (): Promise<number> =>
    new Promise((resolve) => {
      const msg = Buffer.from(body);
      msg.writeUInt32LE((nextId = (nextId + 1) >>> 0), 0);
      const start = performance.now();
      hop.send(msg, () => resolve(performance.now() - start));
    });
  const rows: OverheadRow[] = [];
  try {
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < warmup; i += 1) await once();
      }),
    );
    for (const clients of [1, 8]) {
      const per = Math.ceil(requests / clients);
      const samples: number[] = [];
      const cpuBefore = cpuSnapshot(pids);
      const start = performance.now();
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = 0; i < per; i += 1) samples.push(await once());
        }),
      );
      rows.push(overheadRow('floor', clients, samples, (performance.now() - start) / 1000, cpuBefore, cpuSnapshot(pids)));
    }
  } finally {
    hop.close();
  }
  return rows;
}

export function formatSchedulerOverhead(rows: OverheadRow[]): string {
  const row = (mode: OverheadMode, clients: number): OverheadRow | undefined => rows.find((r) => r.mode === mode && r.clients === clients);
  const ratios = (['generate', 'session'] as const).flatMap((mode) => {
    const one = row(mode, 1);
    const eight = row(mode, 8);
    const f1 = row('floor', 1);
    const f8 = row('floor', 8);
    if (!one || !eight || !f1 || !f8) return [];
    return [
      `    ${mode} / floor: p50 ${(one.p50 / f1.p50).toFixed(2)}×, p99 ${(one.p99 / f1.p99).toFixed(2)}× (1 client); requests/s ${(eight.perSecond / f8.perSecond).toFixed(2)}× (8 clients)`,
    ];
  });
  const lines = [
    '(a) scheduler overhead — 3 no-op stages, every service its own process, gRPC on loopback (send to completed event)',
    '    generate = one Generate call per request; session = requests as messages on one Session stream per client process;',
    '    floor = the same processes and hops with nothing but grpc-js in them (a relay and three echoes): the transport alone',
    '    mode      clients  requests  p50 ms  p99 ms  requests/s   targets: p50 ≤ 2 ms, p99 ≤ 10 ms, ≥ 500 req/s with 8 clients',
    ...rows.map(
      (r) =>
        `    ${r.mode.padEnd(8)}  ${String(r.clients).padStart(7)}  ${String(r.requests).padStart(8)}  ${r.p50.toFixed(2).padStart(6)}  ${r.p99
          .toFixed(2)
          .padStart(6)}  ${r.perSecond.toFixed(0).padStart(10)}`,
    ),
    ...rows
      .filter((r) => Object.keys(r.cpuMsPerRequest).length > 0)
      .map(
        (r) =>
          `    CPU ms per request, ${r.mode}, ${r.clients} client${r.clients === 1 ? '' : 's'}: ` +
          Object.entries(r.cpuMsPerRequest)
            .map(([name, ms]) => `${name} ${ms.toFixed(2)}`)
            .join(', '),
      ),
    ...ratios,
  ];
  return `${lines.join('\n')}\n`;
}

/** Quartiles of a sample, in ms. */
export interface Quartiles {
  p25: number;
  p50: number;
  p75: number;
}

function quartiles(xs: number[]): Quartiles {
  const sorted = [...xs].sort((a, b) => a - b);
  return { p25: pct(sorted, 25), p50: pct(sorted, 50), p75: pct(sorted, 75) };
}

export interface MeshVsEmbedded {
  runs: number;
  /** Warm-up requests each way before the timed ones. */
  warmup: number;
  /** One Generate call per request, as `diffmesh generate --remote` sends it. */
  generate: Quartiles;
  /** One message per request on a Session stream, as the gateway sends it. */
  session: Quartiles;
  embedded: Quartiles;
}

/**
 * Requests each way before (c) is timed. The mesh's paths (stage answers, the tensor put of
 * the pixels in the VAE stage and tensor-svc) run once per request, so V8 compiles them only
 * after many requests: with 3 warm-up requests the ratio read 1.4–1.5×, with 150 1.2–1.3×.
 */
const MESH_WARMUP = 150;

/**
 * (c) One tiny-shapes request (256×256, 20 steps) through the mesh of processes, sent as a
 * Generate call and as a Session message, against the same request embedded in one process;
 * the three take turns, `runs` each.
 */
export async function runMeshVsEmbedded(runs = 31, warmup = MESH_WARMUP): Promise<MeshVsEmbedded> {
  const log = silentLogger();
  const mesh = await startLocalMesh({ modelsDirs: [defaultModelsRoot()], models: ['diffmesh/tiny-shapes'], threads: 1, log });
  const embedded = await startEmbedded({ modelRoots: [defaultModelsRoot()], intraOpThreads: 1, maxBatch: 8, log });
  const client = schedulerStub(mesh.schedulerAddress);
  const session = new SchedulerSession(client);
  try {
    const model = 'diffmesh/tiny-shapes';
    const params = { prompt: 'a red circle on a blue background', seed: '1' };
    const ways: Record<keyof Omit<MeshVsEmbedded, 'runs' | 'warmup'>, () => Promise<number>> = {
      generate: () => timedGenerate(client, model, params),
      session: () => timedSessionRequest(session, model, params),
      embedded: async () => {
        const start = performance.now();
        const { context } = await embedded.scheduler.submit({ model, params });
        for await (const e of embedded.scheduler.watch(context.reqId)) {
          if (e.type === 'failed') throw new Error(e.error.message);
        }
        return performance.now() - start;
      },
    };
    const samples = { generate: [] as number[], session: [] as number[], embedded: [] as number[] };
    // Warm-up of every way, so each runs code V8 has compiled, as in processes that have served a while.
    for (let i = 0; i < warmup; i += 1) for (const run of Object.values(ways)) await run();
    for (let i = 0; i < runs; i += 1) {
      for (const [way, run] of Object.entries(ways)) samples[way as keyof typeof samples].push(await run());
    }
    return {
      runs,
      warmup,
      generate: quartiles(samples.generate),
      session: quartiles(samples.session),
      embedded: quartiles(samples.embedded),
    };
  } finally {
    await session.close();
    client.close();
    await embedded.close();
    await mesh.stop();
  }
}

export function formatMeshVsEmbedded(r: MeshVsEmbedded): string {
  const row = (name: string, q: Quartiles, ratio: string): string =>
    `    ${name.padEnd(9)} ${q.p25.toFixed(1).padStart(6)} ${q.p50.toFixed(1).padStart(6)} ${q.p75.toFixed(1).padStart(6)}   ${ratio}`;
  const ratio = (q: Quartiles): string => `${(q.p50 / r.embedded.p50).toFixed(2)}×   target ≤ 1.25×`;
  return [
    `(c) tiny-shapes request, 256×256, 20 steps — mesh of processes vs embedded (after ${r.warmup} warm-up requests each way; ${r.runs} each, taking turns)`,
    '    generate = one Generate call per request (as `diffmesh generate --remote`); session = a message on one Session stream (as the gateway)',
    '    way       p25 ms p50 ms p75 ms   p50 / embedded p50',
    row('generate', r.generate, ratio(r.generate)),
    row('session', r.session, ratio(r.session)),
    row('embedded', r.embedded, ''),
    '',
  ].join('\n');
}
