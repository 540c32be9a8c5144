import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelManifest } from '@diffmesh/stage-host';

/** Timings of one model's ONNX files at its default size, in milliseconds (medians). */
export interface ModelTimings {
  name: string;
  threads: number;
  /** Latent shape the denoiser ran at: [C, F, h, w]. */
  latent: [number, number, number, number];
  tokens: number;
  textEncoderMs: number;
  /** Denoiser step (one run) by batch size. */
  denoiserMs: Record<number, number>;
  /** Fastest denoiser step by batch size (less sensitive to other load on the machine). */
  denoiserMinMs: Record<number, number>;
  vaeDecoderMs: number;
}

export interface TimeModelOptions {
  /** Intra-op threads (default 2). */
  threads?: number;
  /** Timed runs per measurement after two warm-up runs (default 5). */
  runs?: number;
  /** Denoiser batch sizes (default [1, 2]). */
  batches?: number[];
}

/**
 * Loads a built model directory with onnxruntime-node and times each stage at the
 * manifest's default size. onnxruntime-node is imported lazily so that building models
 * never needs it.
 */
export async function timeModel(dir: string, opts: TimeModelOptions = {}): Promise<ModelTimings> {
  const ort = await import('onnxruntime-node');
  const manifest = JSON.parse(await readFile(path.join(dir, 'model.json'), 'utf8')) as ModelManifest;
  const threads = opts.threads ?? 2;
  const runs = opts.runs ?? 5;
  const batches = opts.batches ?? [1, 2];
  const sessionOptions = {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential' as const,
    graphOptimizationLevel: 'all' as const,
  };
  const open = (file: string) => ort.InferenceSession.create(path.join(dir, file), sessionOptions);
  const { latent, text, defaults } = manifest;
  const tf = latent.temporalFactor ?? 1;
  const frames = tf === 1 ? defaults.numFrames : Math.floor((defaults.numFrames - 1) / tf) + 1;
  const C = latent.channels;
  const h = defaults.height / latent.spatialFactor;
  const w = defaults.width / latent.spatialFactor;
  const L = text.maxLength;
  const D = text.hiddenSize;
  const round = (ms: number): number => Math.round(ms * 10) / 10;
  const measure = async (fn: () => Promise<unknown>): Promise<{ median: number; min: number }> => {
    for (let i = 0; i < 2; i += 1) await fn();
    const times: number[] = [];
    for (let i = 0; i < runs; i += 1) {
      const t0 = performance.now();
      await fn();
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return { median: round(times[Math.floor(times.length / 2)]), min: round(times[0]) };
  };
  const median = async (fn: () => Promise<unknown>): Promise<number> => (await measure(fn)).median;
  const fill = (n: number, seed: number): Float32Array => {
    const out = new Float32Array(n);
    let s = seed >>> 0;
    for (let i = 0; i < n; i += 1) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      out[i] = s / 2147483648 - 1;
    }
    return out;
  };

  const te = await open(manifest.files.textEncoder);
  const ids = new ort.Tensor(
    'int64',
    BigInt64Array.from({ length: L }, (_, i) => BigInt(2 + (i % 50))),
    [1, L],
  );
  const textEncoderMs = await median(() => te.run({ input_ids: ids }));
  await te.release();

  const dn = await open(manifest.files.denoiser);
  const denoiserMs: Record<number, number> = {};
  const denoiserMinMs: Record<number, number> = {};
  for (const b of batches) {
    const feeds = {
      sample: new ort.Tensor('float32', fill(b * C * frames * h * w, 1), [b, C, frames, h, w]),
      timestep: new ort.Tensor('float32', new Float32Array(b).fill(500), [b]),
      encoder_hidden_states: new ort.Tensor('float32', fill(b * L * D, 2), [b, L, D]),
    };
    const m = await measure(() => dn.run(feeds));
    denoiserMs[b] = m.median;
    denoiserMinMs[b] = m.min;
  }
  await dn.release();

  const vae = await open(manifest.files.vaeDecoder);
  const lat = new ort.Tensor('float32', fill(C * frames * h * w, 3), [1, C, frames, h, w]);
  const vaeDecoderMs = await median(() => vae.run({ latent: lat }));
  await vae.release();

  return {
    name: manifest.name,
    threads,
    latent: [C, frames, h, w],
    tokens: frames * (h / 2) * (w / 2),
    textEncoderMs,
    denoiserMs,
    denoiserMinMs,
    vaeDecoderMs,
  };
}
