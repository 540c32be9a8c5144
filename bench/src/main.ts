#!/usr/bin/env node
/**
 * `npm run bench [-- <section>... [--reps N] [--size-mib N] [--backend B,…]]`: runs benchmark sections and
 * prints their tables. With no section named, every section runs. `--list` lists them.
 * Sections add themselves to {@link SECTIONS}; each gets the parsed options and returns
 * the text to print.
 */
import { isMainThread } from 'node:worker_threads';
import { formatMeshVsEmbedded, formatSchedulerOverhead, runMeshVsEmbedded, runSchedulerOverhead } from './mesh.js';
import { formatQueueBackends, QUEUE_BACKENDS, runQueueBackends, type QueueBackend } from './queues.js';
import { formatModelDirTimings, runModelDirTimings } from './model-dirs.js';
import { formatTensorBench, runTensorBench } from './tensor.js';
import { formatCrossNodeBench, runCrossNodeBench } from './cross-node.js';
import { formatLongRuns, runLongRuns } from './long-runs.js';
import { formatGpuBench, runGpuBench } from './gpu.js';
import { formatFairShare, runFairShare } from './fair-share.js';

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
  /** queues: the backends to run (all when absent). */
  backends?: QueueBackend[];
}

/** One named benchmark. */
export interface BenchSection {
  name: string;
  description: string;
  run(opts: BenchOptions): Promise<string>;
}

/** `--reps` and `--size-mib` as the transfer sections take them. */
function transferOptions(o: BenchOptions): { reps?: number; sizeBytes?: number } {
  return {
    ...(o.reps !== undefined ? { reps: o.reps } : {}),
    ...(o.sizeMiB !== undefined ? { sizeBytes: o.sizeMiB * 1024 * 1024 } : {}),
  };
}

export const SECTIONS: BenchSection[] = [
  {
    name: 'scheduler',
    description: '(a) scheduler overhead: 3 no-op stage processes, p50/p99 and requests/s with 1 and 8 clients',
    run: async (o) => formatSchedulerOverhead(await runSchedulerOverhead(o.reps ?? 400)),
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
    run: async (o) => formatQueueBackends(await runQueueBackends(o.reps ?? 300, o.backends)),
  },
  {
    name: 'fair-share',
    description:
      "a light tenant's p50/p99 latency alone and while a second tenant sends 20× its load, first come, first served vs weighted fair share (in-process, modelled 200 ms tasks)",
    run: async () => formatFairShare(await runFairShare()),
  },
  {
    name: 'mesh-vs-embedded',
    description: '(c) one tiny-shapes request through the mesh of processes vs embedded in one process',
    run: async (o) => formatMeshVsEmbedded(await runMeshVsEmbedded(o.reps ?? 31)),
  },
  {
    name: 'long-runs',
    description:
      'a UNet call of seconds (sd1-slow, ~4 s a call): event-loop delay, gRPC health latency and cancel time of the dit-svc, models on its main thread vs in a runner thread',
    run: async (o) => formatLongRuns(await runLongRuns(o.reps !== undefined ? { steps: o.reps } : {})),
  },
  {
    name: 'gpu',
    description:
      'the PixArt-α-sized DiT (project builder, fp32 and fp16; PyTorch’s fp16 export with --torch-dir) per execution provider at batch 1/2/4/8, and synthetic-dit-image 512×512 end to end, embedded and through a mesh',
    run: async (o) =>
      formatGpuBench(
        await runGpuBench({
          ...(o.ditSize ? { size: o.ditSize } : {}),
          ...(o.reps !== undefined ? { reps: o.reps } : {}),
          ...(o.torchDir ? { torchDir: o.torchDir } : {}),
        }),
      ),
  },
  {
    name: 'model-dirs',
    description: 'time per denoising step of each test model directory (diffusers/optimum ONNX layout), embedded',
    run: async (o) => formatModelDirTimings(await runModelDirTimings(o.reps ?? 15)),
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
    } else if (flag === '--backend') {
      const v = (inline ?? argv[++i] ?? '').split(',');
      const bad = v.filter((b) => !(QUEUE_BACKENDS as readonly string[]).includes(b));
      if (bad.length > 0) throw new Error(`--backend takes ${QUEUE_BACKENDS.join(', ')} (comma-separated)`);
      opts.backends = [...(opts.backends ?? []), ...(v as QueueBackend[])];
    } else if (flag.startsWith('--'))
      throw new Error(`unknown option ${flag} (known: --list, --reps, --size-mib, --dit-size, --torch-dir, --backend)`);
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
