#!/usr/bin/env node
/**
 * `npm run bench [-- <section>... [--reps N] [--size-mib N] [--backend B,…]]`: runs benchmark sections and
 * prints their tables. With no section named, every section runs. `--list` lists them.
 * Sections add themselves to {@link SECTIONS}; each gets the parsed options and returns
 * the text to print.
 */
import path from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { formatMeshVsEmbedded, formatSchedulerOverhead, runMeshVsEmbedded, runSchedulerOverhead } from './mesh.js';
import { formatQueueBackends, QUEUE_BACKENDS, runQueueBackends, type QueueBackend } from './queues.js';
import { formatModelDirTimings, runModelDirTimings } from './model-dirs.js';
import { formatTensorBench, runTensorBench } from './tensor.js';
import { formatCrossNodeBench, runCrossNodeBench } from './cross-node.js';
import { formatLongRuns, runLongRuns } from './long-runs.js';
import { DIT_GRAPHS, formatGpuBench, runGpuBench, type DitGraph } from './gpu.js';
import { formatFairShare, runFairShare } from './fair-share.js';
import { formatStepCacheBench, runStepCacheBench, STEP_CACHE_SETTINGS } from './step-cache.js';
import { COST_PRESETS, formatSim, runSim, type SimOptions, type SimQueue } from './sim.js';
import { readFileSync } from 'node:fs';
import { parseStageCosts } from '@diffmesh/scheduler';
import type { PixArtDitShape } from '@diffmesh/models';
import { formatPreviewBench, runPreviewBench, type PreviewCase } from './previews.js';
import { formatPreemption, runPreemption } from './preemption.js';
import { formatAdapterBench, runAdapterBench } from './adapters.js';

/** Options every section may read. */
export interface BenchOptions {
  /** Timed repetitions (sections pick their own default when absent). */
  reps?: number;
  /** Transfer size in MiB, for sections that move bytes. */
  sizeMiB?: number;
  /** gpu: `full` (PixArt-α's 28 blocks) or `small` (2 blocks). */
  ditSize?: 'full' | 'small';
  /** gpu: the output folder of ../shared/gpu/torch_dit_reference.py. */
  torchDir?: string;
  /** gpu: the DiT graphs to compare (`--graphs plain,fused,int4`; `--weights int4` = plain and int4). Default all. */
  graphs?: DitGraph[];
  /** sim: its options (`--sizes`, `--queue`, `--schedulers`, `--costs`, `--scale`, `--duration`, `--cpu-prof`, `--wan-only`, `--no-wan`). */
  sim?: SimOptions;
  /** Print the section's result as JSON (sections that support it: sim). */
  json?: boolean;
  /** queues: the backends to run (all when absent). */
  backends?: QueueBackend[];
  /**
   * `--smoke`: every section at its smallest size (a few requests, the smallest transfers and
   * models, short warm-ups), to check that it runs and prints its table; its figures mean
   * nothing. Options given beside it (`--reps`, `--sizes`, …) still win.
   */
  smoke?: boolean;
}

/** The `--smoke` gpu DiT: PixArt-α's graph at a width, depth and token count that runs in milliseconds on a CPU. */
const SMOKE_DIT: PixArtDitShape = { depth: 1, hidden: 64, heads: 2, latentSize: 8, contextLength: 8, contextDim: 32 };

/** The `--smoke` previews: synthetic-dit-image at 64×64. */
const SMOKE_PREVIEWS: PreviewCase[] = [
  { label: 'synthetic-dit-image 64×64', model: 'diffmesh/synthetic-dit-image', params: { width: 64, height: 64 } },
];

/** The `--smoke` sim: 4 workers on JetStream for 1 s, Wan-14B's costs ÷ 1000, no Wan comparison. */
const SMOKE_SIM: SimOptions = { sizes: [4], queues: ['jetstream'], scale: 1000, durationS: 1, wan: false };

/** One named benchmark. */
export interface BenchSection {
  name: string;
  description: string;
  run(opts: BenchOptions): Promise<string>;
}

/** `--reps` and `--size-mib` as the transfer sections take them. */
function transferOptions(o: BenchOptions): { reps?: number; sizeBytes?: number } {
  const reps = o.reps ?? (o.smoke ? 1 : undefined);
  const sizeMiB = o.sizeMiB ?? (o.smoke ? 1 : undefined);
  return {
    ...(reps !== undefined ? { reps } : {}),
    ...(sizeMiB !== undefined ? { sizeBytes: sizeMiB * 1024 * 1024 } : {}),
  };
}

/** `--reps`, else `smoke` under `--smoke`, else the section's default. */
function reps(o: BenchOptions, normal: number, smoke: number): number {
  return o.reps ?? (o.smoke ? smoke : normal);
}

export const SECTIONS: BenchSection[] = [
  {
    name: 'scheduler',
    description: '(a) scheduler overhead: 3 no-op stage processes, p50/p99 and requests/s with 1 and 8 clients',
    run: async (o) => formatSchedulerOverhead(await runSchedulerOverhead(reps(o, 400, 16), o.smoke ? { warmupPerClient: 4 } : {})),
  },
  {
    name: 'tensor',
    description: 'raw TCP vs tensor-svc gRPC Put/Get vs same-node shared memory, 64 MiB between two processes',
    run: async (o) => formatTensorBench(await runTensorBench(transferOptions(o))),
  },
  {
    name: 'cross-node',
    description: 'a 64 MiB tensor-svc Get (and raw TCP) from another node over veth links vs the same node over loopback (needs root)',
    run: async (o) => formatCrossNodeBench(await runCrossNodeBench(transferOptions(o))),
  },
  {
    name: 'queues',
    description: '(d) each queue backend (memory, sqlite, redis, jetstream) per request: the no-op plan, p50 and requests/s side by side',
    run: async (o) => formatQueueBackends(await runQueueBackends(reps(o, 300, 16), o.backends, o.smoke ? { warmupPerClient: 2 } : {})),
  },
  {
    name: 'fair-share',
    description:
      "a light tenant's p50/p99 latency alone and while a second tenant sends 20× its load, first come, first served vs weighted fair share (in-process, modelled 200 ms tasks)",
    run: async (o) => formatFairShare(await runFairShare(o.smoke ? { slots: 4, taskMs: 100, seconds: 1, warmUpMs: 200 } : {})),
  },
  {
    name: 'sim',
    description:
      'cluster simulation: 50–500 simulated GPU workers (real stage services, modelled model runs) through real schedulers on JetStream and redis; and the Wan-14B scenario as whole-pipeline workers vs 2/28/2 pools',
    run: async (o) => {
      const report = await runSim(o.smoke ? { ...SMOKE_SIM, ...o.sim } : (o.sim ?? {}));
      return o.json ? JSON.stringify(report, null, 2) : formatSim(report);
    },
  },
  {
    name: 'preemption',
    description:
      'short images (priority 10, or a deadline) arriving while 8-frame × 50-step videos fill a one-slot DiT pool: image p50/p99, time to start, deadline attainment and video throughput, preemption off vs on (a mesh of processes, ~3 min)',
    run: async (o) => formatPreemption(await runPreemption(o.smoke ? { videos: 1, images: 2, intervalMs: 200, videoSteps: 8 } : {})),
  },
  {
    name: 'mesh-vs-embedded',
    description: '(c) one tiny-shapes request through the mesh of processes vs embedded in one process',
    run: async (o) => formatMeshVsEmbedded(await runMeshVsEmbedded(reps(o, 31, 2), o.smoke ? 1 : undefined)),
  },
  {
    name: 'long-runs',
    description:
      'a UNet call of seconds (sd1-slow, ~4 s a call): event-loop delay, gRPC health latency and cancel time of the dit-svc, models on its main thread vs in a runner thread',
    run: async (o) =>
      formatLongRuns(
        await runLongRuns({
          ...(o.smoke ? { steps: 1, products: 1 } : {}),
          ...(o.reps !== undefined ? { steps: o.reps } : {}),
        }),
      ),
  },
  {
    name: 'gpu',
    description:
      'the PixArt-α-sized DiT (project builder, fp32 and fp16; PyTorch’s fp16 export with --torch-dir) per execution provider at batch 1/2/4/8, and synthetic-dit-image 512×512 end to end, embedded and through a mesh',
    run: async (o) =>
      formatGpuBench(
        await runGpuBench({
          ...(o.smoke ? { reps: 1, batches: [1, 2], pipelineSteps: 1, pipelineSize: 64 } : {}),
          ...(o.ditSize ? { size: o.ditSize } : o.smoke ? { shape: SMOKE_DIT } : {}),
          ...(o.reps !== undefined ? { reps: o.reps } : {}),
          ...(o.torchDir ? { torchDir: o.torchDir } : {}),
          ...(o.graphs ? { graphs: o.graphs } : {}),
        }),
      ),
  },
  {
    name: 'previews',
    description:
      "live previews' cost: synthetic-dit-image's denoising loop with previews off vs every 4 steps vs every step, side by side (embedded), and one preview alone at real models' latent sizes",
    run: async (o) =>
      formatPreviewBench(
        await runPreviewBench(reps(o, 9, 1), o.smoke ? SMOKE_PREVIEWS : undefined, o.smoke ? { steps: 4, costCalls: 5 } : {}),
      ),
  },
  {
    name: 'model-dirs',
    description: 'time per denoising step of each test model directory (diffusers/optimum ONNX layout), embedded',
    run: async (o) => formatModelDirTimings(await runModelDirTimings(reps(o, 15, 1), o.smoke ? 2 : undefined)),
  },
  {
    name: 'step-cache',
    description:
      'step caching (TeaCache-style) on the built-in DiT models and the test model directories: model calls saved and pixel error against the uncached picture at thresholds 0.05–0.4',
    run: async (o) =>
      formatStepCacheBench(
        o.smoke ? await runStepCacheBench(4, [STEP_CACHE_SETTINGS[0], STEP_CACHE_SETTINGS[4]]) : await runStepCacheBench(),
      ),
  },
  {
    name: 'adapters',
    description:
      "LoRA branches: ms per denoising step at batch 1 and 4 with 0, 1 and 4 distinct adapters, against no adapter and the adapter merged into the weights (synthetic-dit-image's denoiser)",
    run: async (o) => formatAdapterBench(await runAdapterBench(reps(o, 7, 1))),
  },
];

function parseArgs(argv: string[]): { names: string[]; opts: BenchOptions; list: boolean } {
  const names: string[] = [];
  const opts: BenchOptions = {};
  let list = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.startsWith('--') ? a.split('=', 2) : [a, undefined];
    const value = (): number => {
      const v = Number(inline ?? argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} needs a positive number`);
      return v;
    };
    if (flag === '--list') list = true;
    else if (flag === '--smoke') opts.smoke = true;
    else if (flag === '--reps') opts.reps = Math.round(value());
    else if (flag === '--size-mib') opts.sizeMiB = value();
    else if (flag === '--dit-size') {
      const v = inline ?? argv[++i];
      if (v !== 'full' && v !== 'small') throw new Error('--dit-size takes full or small');
      opts.ditSize = v;
    } else if (flag === '--torch-dir') {
      const v = inline ?? argv[++i];
      if (!v) throw new Error('--torch-dir needs a folder');
      opts.torchDir = v;
    } else if (flag === '--graphs') {
      const v = (inline ?? argv[++i] ?? '').split(',');
      if (v.length === 0 || v.some((g) => !(DIT_GRAPHS as readonly string[]).includes(g)))
        throw new Error(`--graphs takes ${DIT_GRAPHS.join(', ')} (comma-separated)`);
      opts.graphs = v as DitGraph[];
    } else if (flag === '--weights') {
      const v = inline ?? argv[++i];
      if (v !== 'int4') throw new Error('--weights takes int4 (the 4-bit graph beside the plain one)');
      opts.graphs = ['plain', 'int4'];
    } else if (flag === '--json') opts.json = true;
    else if (flag === '--sizes') {
      const v = inline ?? argv[++i] ?? '';
      const sizes = v.split(',').map(Number);
      if (sizes.length === 0 || sizes.some((n) => !Number.isInteger(n) || n < 1))
        throw new Error('--sizes takes worker counts, e.g. 50,100');
      (opts.sim ??= {}).sizes = sizes;
    } else if (flag === '--queue') {
      const v = inline ?? argv[++i] ?? '';
      const queues = v.split(',') as SimQueue[];
      if (queues.some((q) => q !== 'jetstream' && q !== 'redis')) throw new Error('--queue takes jetstream, redis or jetstream,redis');
      (opts.sim ??= {}).queues = queues;
    } else if (flag === '--schedulers') {
      const n = Math.round(value());
      if (n > 3) throw new Error('--schedulers takes 1 to 3');
      (opts.sim ??= {}).schedulers = n;
    } else if (flag === '--costs') {
      const v = inline ?? argv[++i] ?? '';
      const sim = (opts.sim ??= {});
      sim.costs = COST_PRESETS[v] ?? parseStageCosts(readFileSync(v, 'utf8'));
      sim.costsName = COST_PRESETS[v] ? v : path.basename(v);
    } else if (flag === '--scale') (opts.sim ??= {}).scale = value();
    else if (flag === '--duration') (opts.sim ??= {}).durationS = value();
    else if (flag === '--cpu-prof') (opts.sim ??= {}).cpuProf = true;
    else if (flag === '--no-wan') (opts.sim ??= {}).wan = false;
    else if (flag === '--wan-only') (opts.sim ??= {}).sweep = false;
    else if (flag === '--wan-scale') (opts.sim ??= {}).wanScale = value();
    else if (flag === '--backend') {
      const v = (inline ?? argv[++i] ?? '').split(',');
      const bad = v.filter((b) => !(QUEUE_BACKENDS as readonly string[]).includes(b));
      if (bad.length > 0) throw new Error(`--backend takes ${QUEUE_BACKENDS.join(', ')} (comma-separated)`);
      opts.backends = [...(opts.backends ?? []), ...(v as QueueBackend[])];
    } else if (flag.startsWith('--'))
      throw new Error(
        `unknown option ${flag} (known: --list, --smoke, --reps, --size-mib, --dit-size, --torch-dir, --graphs, --weights, --json; queues: --backend; sim: --sizes, --queue, --schedulers, --costs, --scale, --duration, --cpu-prof, --no-wan, --wan-only, --wan-scale)`,
      );
    else names.push(a);
  }
  return { names, opts, list };
}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs(argv);
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.list) {
    for (const s of SECTIONS) process.stdout.write(`${s.name.padEnd(12)} ${s.description}\n`);
    return 0;
  }
  const unknown = parsed.names.filter((n) => !SECTIONS.some((s) => s.name === n));
  if (unknown.length > 0) {
    process.stderr.write(`bench: unknown section ${unknown.join(', ')} (known: ${SECTIONS.map((s) => s.name).join(', ')})\n`);
    return 2;
  }
  const chosen = parsed.names.length > 0 ? SECTIONS.filter((s) => parsed.names.includes(s.name)) : SECTIONS;
  for (const s of chosen) {
    process.stderr.write(`== ${s.name}: ${s.description}\n`);
    process.stdout.write(`${await s.run(parsed.opts)}\n\n`);
  }
  return 0;
}

// Only on the main thread: in a single-file bundle this module is also what a model runner
// thread loads (the runner starts from the bundle), and that thread must not run the bench.
if (isMainThread) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
