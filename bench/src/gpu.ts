import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbedded, startLocalMesh } from '@diffmesh/cli';
import { schedulerStub } from '@diffmesh/client';
import { paramsToWire, silentLogger, type GenerationParams } from '@diffmesh/core';
import { buildPixArtDit, defaultModelsRoot, PIXART_ALPHA_SHAPE, type PixArtDitShape } from '@diffmesh/models';
import type { GenerateResponse__Output } from '@diffmesh/protos';
import { toFloat16 } from '@diffmesh/tensor-client';
import { ort, probeInstalledProviders, SessionCache, type ExecutionProvider, type ModelSession } from '@diffmesh/stage-host';
import {
  DIT_GRAPHS,
  GRAPH_REWRITES,
  graphLines,
  outputError,
  pixelPsnr,
  times,
  type DitGraph,
  type DitQuality,
  type DitTiming,
} from './gpu-graphs.js';

export { DIT_GRAPHS };
export type { DitGraph, DitQuality, DitTiming };

/** One end-to-end request of synthetic-dit-image. */
export interface PipelineTiming {
  provider: string;
  where: 'embedded' | 'mesh';
  graph: DitGraph;
  /** The picture against the plain graph's (same seed), dB. */
  psnrDb?: number;
  /** Median ms of a whole request (text encoding, 20 steps, VAE). */
  requestMs: number;
  /** Its first request (warm-up off) against a later one, ms. */
  firstRequestMs: number;
  note?: string;
}

export interface GpuBench {
  shape: PixArtDitShape;
  gflopPerItem: number;
  parameters: number;
  providers: Array<{ provider: string; works: boolean; why?: string; software?: boolean; f16?: boolean }>;
  dit: DitTiming[];
  quality: DitQuality[];
  pipeline: PipelineTiming[];
  /** Steps and size (pixels a side) of each pipeline request. */
  pipelineSteps: number;
  pipelineSize: number;
  notes: string[];
  /** `torch_dit_reference.py`'s torch.json (its timings, device and versions), when given. */
  torch?: Record<string, unknown>;
}

export interface GpuBenchOptions {
  /** `full`: PixArt-α's 28 blocks; `small`: 2 blocks of the same width (per-block cost unchanged). Default: full on a hardware GPU, else small. */
  size?: 'full' | 'small';
  /** Timed runs per batch size (default 5; 2 on a software adapter). */
  reps?: number;
  /** The output folder of `../shared/gpu/torch_dit_reference.py` (dit.onnx, torch.json): timed too, beside PyTorch's figures. */
  torchDir?: string;
  /** Graphs to compare (default all: plain, fused, int4). */
  graphs?: readonly DitGraph[];
  /** The DiT's shape, instead of `size`'s (e.g. a tiny one that only checks the section runs). */
  shape?: PixArtDitShape;
  /** Batch sizes the DiT is timed at. Default 1, 2, 4, 8 on a GPU, 1, 2 on a CPU. */
  batches?: number[];
  /** Steps and size (pixels a side) of the synthetic-dit-image pipeline requests. Default 20 steps at 512×512. */
  pipelineSteps?: number;
  pipelineSize?: number;
}

/** Working providers here, with whether WebGPU runs on a software adapter (SwiftShader). */
async function workingProviders(): Promise<GpuBench['providers']> {
  return (await probeInstalledProviders()).map((s) => {
    const probe = s.probe;
    if (!probe) return { provider: s.provider, works: false, why: `not installed (missing ${s.missingFiles.join(', ')})` };
    const software = s.provider === 'webgpu' && /swiftshader|llvmpipe|lavapipe/i.test(process.env.VK_ICD_FILENAMES ?? '');
    return {
      provider: s.provider,
      works: probe.works,
      ...(probe.error ? { why: probe.error } : {}),
      ...(software ? { software } : {}),
      ...(probe.f16 !== undefined ? { f16: probe.f16 } : {}),
    };
  });
}

/**
 * `npm run bench -- gpu`: the PixArt-α-sized DiT (built with the project's ONNX builder, fp32)
 * per provider at batch 1, 2, 4 and 8 (ms per step and per item, first run, TFLOP/s), the
 * fp16 DiT exported by `torch_dit_reference.py` when its folder is given (`--torch-dir`), and
 * synthetic-dit-image end to end at 512×512 (20 steps), embedded and through a mesh whose DiT
 * pool runs on the provider. On a software adapter (SwiftShader) the work is cut down and said so.
 */
export async function runGpuBench(opts: GpuBenchOptions = {}): Promise<GpuBench> {
  const providers = await workingProviders();
  const working = providers.filter((p) => p.works);
  const hardware = working.some((p) => p.provider !== 'cpu' && !p.software);
  const size = opts.size ?? (hardware ? 'full' : 'small');
  const shape: PixArtDitShape = opts.shape ?? (size === 'full' ? PIXART_ALPHA_SHAPE : { ...PIXART_ALPHA_SHAPE, depth: 2 });
  const notes: string[] = [];
  const pipelineSteps = opts.pipelineSteps ?? 20;
  const pipelineSize = opts.pipelineSize ?? 512;
  if (opts.shape) notes.push('the DiT has the shape asked for, not PixArt-α’s');
  else if (!hardware) {
    notes.push(
      'no hardware GPU provider works here: the DiT has 2 of PixArt-α’s 28 blocks (the same width, tokens and cross-attention, so per-block cost is the same; a full step costs about 14× these figures)',
    );
  }
  const root = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-gpu-'));
  const dit: DitTiming[] = [];
  const quality: DitQuality[] = [];
  const pipeline: PipelineTiming[] = [];
  let built: Awaited<ReturnType<typeof buildPixArtDit>>;
  try {
    built = await buildPixArtDit(path.join(root, 'dit'), shape, 'fp32');
    const graphs = opts.graphs ?? DIT_GRAPHS;
    const fusedBuilt = graphs.includes('fused') ? await buildPixArtDit(path.join(root, 'dit-fused'), shape, 'fp32', 'fused') : undefined;
    const half = working.some((p) => !p.software && p.f16) ? await buildPixArtDit(path.join(root, 'dit-fp16'), shape, 'fp16') : undefined;
    // On the CPU alone, batches 4 and 8 buy nothing (ENVIRONMENT.md) and would triple the run.
    const batches = opts.batches ?? (hardware ? [1, 2, 4, 8] : [1, 2]);
    if (!hardware) notes.push('CPU only: the DiT is timed at batch 1 and 2');
    for (const p of working) {
      if (p.software) {
        // SwiftShader ran the 2-block DiT at about 0.6 GFLOP/s here (over 3 minutes a step).
        notes.push(`${p.provider} runs on a software adapter (under 1 GFLOP/s on this DiT, minutes a step): not timed`);
        continue;
      }
      const reps = opts.reps ?? (hardware ? 5 : 3);
      const provider = p.provider as ExecutionProvider;
      let reference: Float32Array | undefined;
      for (const graph of graphs) {
        const file = graph === 'fused' && fusedBuilt ? fusedBuilt.file : built.file;
        const r = await timeDit(
          provider,
          file,
          'fp32',
          'diffmesh builder',
          graph,
          batches,
          reps,
          built.flopsPerItem,
          ditFeeds(built.inputs),
        );
        dit.push(...r.timings);
        reference ??= graph === 'plain' ? r.output : undefined;
        quality.push({
          provider,
          precision: 'fp32',
          graph,
          ...outputError(reference, r.output),
          weightBytes: r.weightBytes,
          rssGrowthBytes: r.rssGrowthBytes,
        });
      }
      if (half && p.f16) {
        for (const graph of graphs.filter((x) => x !== 'fused')) {
          const r = await timeDit(
            provider,
            half.file,
            'fp16',
            'diffmesh builder',
            graph,
            batches,
            reps,
            half.flopsPerItem,
            ditFeeds(half.inputs),
          );
          dit.push(...r.timings);
          quality.push({
            provider,
            precision: 'fp16',
            graph,
            ...outputError(reference, r.output),
            weightBytes: r.weightBytes,
            rssGrowthBytes: r.rssGrowthBytes,
          });
        }
      } else if (!p.f16) {
        notes.push(`${p.provider}: float16 does not run here (no shader-f16): fp16 not timed`);
      }
    }
    let torch: Record<string, unknown> | undefined;
    if (opts.torchDir) {
      const onnxFile = path.join(opts.torchDir, 'dit.onnx');
      const json = path.join(opts.torchDir, 'torch.json');
      if (existsSync(json)) torch = JSON.parse(readFileSync(json, 'utf8')) as Record<string, unknown>;
      if (existsSync(onnxFile)) {
        const t = torch ?? {};
        const hw = Number(t.hw ?? 64);
        const L = Number(t.L ?? 120);
        const cdim = Number(t.cdim ?? 4096);
        const precision = t.dtype === 'float16' ? 'fp16' : 'fp32';
        const flops = Number(t.gflop_per_item ?? built.flopsPerItem / 1e9) * 1e9;
        for (const p of working) {
          if (p.software) continue;
          dit.push(
            ...(
              await timeDit(
                p.provider as ExecutionProvider,
                onnxFile,
                precision,
                'torch export',
                'plain',
                opts.batches ?? [1, 2, 4, 8],
                opts.reps ?? 5,
                flops,
                torchFeeds(hw, L, cdim, precision),
              )
            ).timings,
          );
        }
      } else {
        notes.push(`${onnxFile} not found: run ../shared/gpu/torch_dit_reference.py ${opts.torchDir} first`);
      }
    }
    for (const p of working) {
      if (p.software) {
        pipeline.push({
          provider: p.provider,
          where: 'embedded',
          graph: 'plain',
          requestMs: NaN,
          firstRequestMs: NaN,
          note: 'skipped: a software adapter takes minutes per 512×512 request',
        });
        continue;
      }
      const provider = p.provider as ExecutionProvider;
      const requests = hardware ? 3 : 1;
      const pipelineParams = { ...PIPELINE_PARAMS, numInferenceSteps: pipelineSteps, width: pipelineSize, height: pipelineSize };
      let plainPixels: Uint8Array | undefined;
      for (const graph of graphs) {
        const e = await timeEmbedded(provider, pipelineParams, graph, requests);
        plainPixels ??= graph === 'plain' ? e.pixels : undefined;
        pipeline.push({ ...e.timing, ...(plainPixels ? { psnrDb: pixelPsnr(plainPixels, e.pixels) } : {}) });
      }
      for (const graph of graphs) {
        // A bench bundled for a machine without Node.js has no service packages to start.
        pipeline.push(
          await timeMesh(provider, pipelineParams, graph, requests).catch((err: unknown): PipelineTiming => ({
            provider: p.provider,
            where: 'mesh',
            graph,
            requestMs: NaN,
            firstRequestMs: NaN,
            note: `not run: ${(err as Error).message.split('\n')[0]}`,
          })),
        );
      }
    }
    return {
      shape,
      gflopPerItem: built.flopsPerItem / 1e9,
      parameters: built.parameters,
      providers,
      dit,
      quality,
      pipelineSteps,
      pipelineSize,
      pipeline,
      notes,
      ...(torch ? { torch } : {}),
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

type Feeds = (batch: number) => Record<string, ort.Tensor>;

function ditFeeds(inputs: { sample: number[]; encoderHiddenStates: number[] }): Feeds {
  return (B) => ({
    sample: new ort.Tensor('float32', randoms(B * inputs.sample.reduce((a, b) => a * b, 1), 1), [B, ...inputs.sample]),
    timestep: new ort.Tensor('float32', new Float32Array(B).fill(500), [B]),
    encoder_hidden_states: new ort.Tensor('float32', randoms(B * inputs.encoderHiddenStates.reduce((a, b) => a * b, 1), 2), [
      B,
      ...inputs.encoderHiddenStates,
    ]),
  });
}

/** Inputs of the torch export: sample [B, 4, hw, hw], timestep [B], encoder_hidden_states [B, L, cdim], in its dtype. */
function torchFeeds(hw: number, L: number, cdim: number, precision: 'fp16' | 'fp32'): Feeds {
  const tensor = (data: Float32Array, dims: number[]) =>
    precision === 'fp16' ? new ort.Tensor('float16', toFloat16(data), dims) : new ort.Tensor('float32', data, dims);
  return (B) => ({
    sample: tensor(randoms(B * 4 * hw * hw, 1), [B, 4, hw, hw]),
    timestep: tensor(new Float32Array(B).fill(500), [B]),
    encoder_hidden_states: tensor(randoms(B * L * cdim, 2), [B, L, cdim]),
  });
}

function randoms(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let x = seed * 2654435761;
  for (let i = 0; i < n; i += 1) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = (x / 4294967296 - 0.5) * 2;
  }
  return out;
}

/** One graph's timings at each batch, its batch-1 output, its weights' bytes and the RSS its session took. */
interface TimedGraph {
  timings: DitTiming[];
  output: Float32Array;
  weightBytes: number;
  rssGrowthBytes: number;
}

async function timeDit(
  provider: ExecutionProvider,
  file: string,
  precision: 'fp32' | 'fp16',
  source: DitTiming['source'],
  graph: DitGraph,
  batches: number[],
  reps: number,
  flopsPerItem: number,
  feeds: Feeds,
): Promise<TimedGraph> {
  const sessions = new SessionCache({
    intraOpThreads: 0,
    interOpThreads: 1,
    executionProviders: [provider],
    graphRewrites: GRAPH_REWRITES[graph],
  });
  const timings: DitTiming[] = [];
  try {
    const rss0 = process.memoryUsage().rss;
    const session: ModelSession = await sessions.get(file, { rewrite: true });
    const rssGrowthBytes = process.memoryUsage().rss - rss0;
    const weightBytes = session.rewrites?.weightBytesAfter ?? fileBytes(file);
    let output = new Float32Array(0);
    for (const B of batches) {
      const f = feeds(B);
      const t0 = performance.now();
      const first = await session.run(f);
      const firstRunMs = performance.now() - t0;
      if (B === 1) output = Float32Array.from(first.out.data as Float32Array);
      await session.run(f);
      const ms: number[] = [];
      for (let r = 0; r < reps; r += 1) {
        const t = performance.now();
        await session.run(f);
        ms.push(performance.now() - t);
      }
      ms.sort((a, b) => a - b);
      const msPerStep = ms[Math.floor(ms.length / 2)];
      process.stderr.write(
        `  ${provider} ${precision} ${graph} (${source}) batch ${B}: ${msPerStep.toFixed(1)} ms/step (first run ${firstRunMs.toFixed(0)} ms)\n`,
      );
      timings.push({
        provider,
        precision,
        source,
        graph,
        batch: B,
        msPerStep,
        msPerItem: msPerStep / B,
        firstRunMs,
        tflops: (flopsPerItem * B) / (msPerStep / 1000) / 1e12,
      });
    }
    return { timings, output, weightBytes, rssGrowthBytes };
  } finally {
    await sessions.close();
  }
}

/** Bytes of a model file and its external data beside it. */
function fileBytes(file: string): number {
  const data = `${file}_data`;
  return statSync(file).size + (existsSync(data) ? statSync(data).size : 0);
}

const PIPELINE_PARAMS: Partial<GenerationParams> & { prompt: string } = {
  prompt: 'a red cat',
  seed: '1',
};

/** Median of `requests` timed requests after a first one; the last picture. */
async function timedRequests(
  requests: number,
  once: () => Promise<{ ms: number; pixels?: Uint8Array }>,
): Promise<{ firstRequestMs: number; requestMs: number; pixels?: Uint8Array }> {
  const first = await once();
  const runs = [];
  for (let i = 0; i < requests; i += 1) runs.push(await once());
  const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
  return { firstRequestMs: first.ms, requestMs: ms[Math.floor(ms.length / 2)], pixels: (runs.at(-1) ?? first).pixels };
}

async function timeEmbedded(
  provider: ExecutionProvider,
  params: typeof PIPELINE_PARAMS,
  graph: DitGraph,
  requests: number,
): Promise<{ timing: PipelineTiming; pixels: Uint8Array }> {
  const e = await startEmbedded({
    modelRoots: [defaultModelsRoot()],
    intraOpThreads: 0,
    executionProviders: provider === 'cpu' ? ['cpu'] : [provider, 'cpu'],
    maxBatch: 8,
    graphRewrites: GRAPH_REWRITES[graph],
    log: silentLogger(),
  });
  const once = async (): Promise<{ ms: number; pixels: Uint8Array }> => {
    const t = performance.now();
    const { context } = await e.scheduler.submit({ model: 'diffmesh/synthetic-dit-image', params });
    for await (const ev of e.scheduler.watch(context.reqId)) {
      if (ev.type === 'failed') throw new Error(ev.error.message);
      if (ev.type === 'completed') {
        const ms = performance.now() - t;
        return { ms, pixels: Uint8Array.from((await e.store.get(ev.outputs.pixels)).data) };
      }
    }
    throw new Error('request ended without completing');
  };
  try {
    const r = await timedRequests(requests, once);
    process.stderr.write(`  embedded ${provider} ${graph}: ${r.requestMs.toFixed(0)} ms a request\n`);
    return {
      timing: { provider, where: 'embedded', graph, requestMs: r.requestMs, firstRequestMs: r.firstRequestMs },
      pixels: r.pixels ?? new Uint8Array(0),
    };
  } finally {
    await e.close();
  }
}

async function timeMesh(
  provider: ExecutionProvider,
  params: typeof PIPELINE_PARAMS,
  graph: DitGraph,
  requests: number,
): Promise<PipelineTiming> {
  const rewrites = GRAPH_REWRITES[graph];
  const mesh = await startLocalMesh({
    modelsDirs: [defaultModelsRoot()],
    models: ['diffmesh/synthetic-dit-image'],
    threads: 0,
    log: silentLogger(),
    stageArgs: [...(rewrites.kernels ? ['--kernels', rewrites.kernels] : []), ...(rewrites.weights ? ['--weights', rewrites.weights] : [])],
    ...(provider === 'cpu' ? {} : { executionProviders: { dit: [provider, 'cpu'], vae: [provider, 'cpu'] } }),
  });
  const client = schedulerStub(mesh.schedulerAddress);
  const once = (): Promise<{ ms: number }> =>
    new Promise((resolve, reject) => {
      const t = performance.now();
      const call = client.Generate({ model: 'diffmesh/synthetic-dit-image', params: paramsToWire(params), priority: 0 });
      let done = 0;
      call.on('data', (m: GenerateResponse__Output) => {
        for (const ev of m.events) {
          if (ev.completed) done = performance.now() - t;
          if (ev.failed) reject(new Error(ev.failed.error?.message));
        }
      });
      call.on('error', reject);
      call.on('end', () => (done ? resolve({ ms: done }) : reject(new Error('request ended without completing'))));
    });
  try {
    const r = await timedRequests(requests, once);
    process.stderr.write(`  mesh ${provider} ${graph}: ${r.requestMs.toFixed(0)} ms a request\n`);
    return {
      provider,
      where: 'mesh',
      graph,
      requestMs: r.requestMs,
      firstRequestMs: r.firstRequestMs,
      note: 'warm-up at start: auto (GPU providers)',
    };
  } finally {
    client.close();
    await mesh.stop();
  }
}

export function formatGpuBench(b: GpuBench): string {
  const f = (v: number, d = 1) => (Number.isFinite(v) ? v.toFixed(v >= 100 ? 0 : d) : 'n/a');
  const lines = [
    `PixArt-shaped DiT: ${b.shape.depth} blocks × ${b.shape.hidden}, ${b.shape.heads} heads, ${(b.shape.latentSize / 2) ** 2} tokens, cross-attention to ${b.shape.contextLength}×${b.shape.contextDim}; ${f(b.parameters / 1e6, 0)} M parameters, ${f(b.gflopPerItem, 0)} GFLOP per item per step`,
    `providers: ${b.providers.map((p) => `${p.provider} ${p.works ? (p.software ? 'works (software adapter)' : 'works') : `no (${p.why ?? ''})`}`).join('; ')}`,
    '',
    '| provider | graph | batch | ms / step | ms / item | first run ms | TFLOP/s |',
    '|---|---|---:|---:|---:|---:|---:|',
  ];
  for (const t of b.dit) {
    lines.push(
      `| ${t.provider} | ${t.precision} ${t.graph} (${t.source}) | ${t.batch} | ${f(t.msPerStep)} | ${f(t.msPerItem)} | ${f(t.firstRunMs)} | ${f(t.tflops, 2)} |`,
    );
  }
  // CFG as one batch-2 run against two batch-1 runs, from the same table.
  for (const p of new Set(b.dit.map((t) => `${t.provider}|${t.precision}|${t.source}|${t.graph}`))) {
    const key = (t: DitTiming) => `${t.provider}|${t.precision}|${t.source}|${t.graph}`;
    const [provider, precision, , graph] = p.split('|');
    const one = b.dit.find((t) => key(t) === p && t.batch === 1);
    const two = b.dit.find((t) => key(t) === p && t.batch === 2);
    if (one && two) {
      lines.push(
        `${provider} ${precision} ${graph}: a CFG step as one batch-2 run ${f(two.msPerStep)} ms vs two batch-1 runs ${f(2 * one.msPerStep)} ms (${times((2 * one.msPerStep) / two.msPerStep)})`,
      );
    }
  }
  lines.push(...graphLines(b, f));
  if (b.torch) {
    const t = b.torch;
    const text = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
    lines.push('', `PyTorch on the same DiT (${text(t.device)}, torch ${text(t.torch)}):`);
    for (const [k, v] of Object.entries(t)) if (k.startsWith('torch_') && typeof v === 'number') lines.push(`  ${k}: ${v} ms/step`);
    const fp16b1 = b.dit.find((x) => x.source === 'torch export' && x.batch === 1 && x.provider !== 'cpu');
    if (fp16b1 && typeof t.torch_fp16_b1 === 'number')
      lines.push(`  onnxruntime ${fp16b1.provider} / torch fp16 at batch 1: ${times(fp16b1.msPerStep / t.torch_fp16_b1)}`);
  }
  lines.push(
    '',
    `| pipeline (synthetic-dit-image ${b.pipelineSize}×${b.pipelineSize}, ${b.pipelineSteps} steps) | provider | graph | request ms | time ÷ plain | first request ms | picture PSNR vs plain dB | note |`,
    '|---|---|---|---:|---:|---:|---:|---|',
  );
  for (const p of b.pipeline) {
    const base = b.pipeline.find((x) => x.where === p.where && x.provider === p.provider && x.graph === 'plain');
    const ratio = base ? f(p.requestMs / base.requestMs, 2) : 'n/a';
    const psnr = p.psnrDb === undefined ? '' : p.psnrDb === Infinity ? 'equal' : f(p.psnrDb);
    lines.push(
      `| ${p.where} | ${p.provider} | ${p.graph} | ${f(p.requestMs)} | ${ratio} | ${f(p.firstRequestMs)} | ${psnr} | ${p.note ?? ''} |`,
    );
  }
  for (const n of b.notes) lines.push(`note: ${n}`);
  return lines.join('\n');
}
