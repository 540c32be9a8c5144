import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { latentFrames, ModelManifestSchema, type ModelManifest } from '@diffmesh/stage-host';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildModels, builtinModelDir } from './build.js';
import { SYNTHETIC_VOCABULARY } from './builders/synthetic-dit.js';

const IMAGE = 'diffmesh/synthetic-dit-image';
const VIDEO = 'diffmesh/synthetic-dit-video';
const NAMES = [IMAGE, VIDEO];

let rootA: string;
let rootB: string;

beforeAll(async () => {
  rootA = await mkdtemp(path.join(tmpdir(), 'diffmesh-synth-a-'));
  rootB = await mkdtemp(path.join(tmpdir(), 'diffmesh-synth-b-'));
  await buildModels({ outRoot: rootA, only: NAMES });
  await buildModels({ outRoot: rootB, only: NAMES });
});

afterAll(async () => {
  for (const dir of [rootA, rootB]) if (dir) await rm(dir, { recursive: true, force: true });
});

async function fileHashes(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) {
    out[name] = createHash('sha256')
      .update(await readFile(path.join(dir, name)))
      .digest('hex');
  }
  return out;
}

async function manifestOf(name: string): Promise<ModelManifest> {
  const raw = JSON.parse(await readFile(path.join(builtinModelDir(name, rootA), 'model.json'), 'utf8')) as unknown;
  return ModelManifestSchema.parse(raw);
}

const SESSION_OPTIONS = { intraOpNumThreads: 2, interOpNumThreads: 1, executionMode: 'sequential' as const };

function session(name: string, file: string): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(path.join(builtinModelDir(name, rootA), file), SESSION_OPTIONS);
}

/** Deterministic standard-normal-ish values. */
function randn(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  const next = (): number => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s + 1) / 4294967297;
  };
  for (let i = 0; i < n; i += 1) out[i] = Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next());
  return out;
}

function f32(dims: number[], seed: number): ort.Tensor {
  return new ort.Tensor(
    'float32',
    randn(
      dims.reduce((a, b) => a * b, 1),
      seed,
    ),
    dims,
  );
}

function stats(data: Float32Array): { finite: boolean; min: number; max: number; std: number } {
  let finite = true;
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let sq = 0;
  for (const v of data) {
    if (!Number.isFinite(v)) finite = false;
    min = Math.min(min, v);
    max = Math.max(max, v);
    sum += v;
    sq += v * v;
  }
  const mean = sum / data.length;
  return { finite, min, max, std: Math.sqrt(Math.max(sq / data.length - mean * mean, 0)) };
}

describe('synthetic DiT builders', () => {
  it('are deterministic: two builds give byte-identical files', async () => {
    for (const name of NAMES) {
      const a = await fileHashes(builtinModelDir(name, rootA));
      const b = await fileHashes(builtinModelDir(name, rootB));
      expect(Object.keys(a)).toEqual([
        '.build-hash',
        'denoiser.onnx',
        'model.json',
        'text_encoder.onnx',
        'tokenizer.json',
        'vae_decoder.onnx',
      ]);
      expect(b).toEqual(a);
    }
  });

  it('keep each model well under 100 MB', async () => {
    for (const name of NAMES) {
      const dir = builtinModelDir(name, rootA);
      let total = 0;
      for (const f of await readdir(dir)) total += (await stat(path.join(dir, f))).size;
      expect(total).toBeLessThan(90e6);
      expect(total).toBeGreaterThan(10e6); // realistic widths, not a toy
    }
  });

  it('write manifests that validate and describe the models', async () => {
    const image = await manifestOf(IMAGE);
    expect(image).toMatchObject({
      name: IMAGE,
      modalities: ['text-to-image'],
      prediction: 'epsilon',
      sampler: { type: 'ddim', numTrainTimesteps: 1000, betaStart: 0.00085, betaEnd: 0.012, betaSchedule: 'scaled_linear' },
      latent: { channels: 4, spatialFactor: 8, temporalFactor: 1 },
      text: { tokenizer: 'tokenizer.json', maxLength: 32, hiddenSize: 256, padId: 0 },
      defaults: { width: 256, height: 256, numFrames: 1, steps: 20, guidanceScale: 4.5 },
      limits: { maxWidth: 512, maxHeight: 512, maxFrames: 1 },
    });
    const video = await manifestOf(VIDEO);
    expect(video).toMatchObject({
      name: VIDEO,
      modalities: ['text-to-video'],
      prediction: 'flow',
      sampler: { type: 'flow_euler', shift: 3 },
      latent: { channels: 16, spatialFactor: 8, temporalFactor: 4 },
      text: { maxLength: 32, hiddenSize: 256 },
      defaults: { width: 256, height: 256, numFrames: 9, steps: 20, guidanceScale: 5, fps: 8 },
      limits: { maxWidth: 512, maxHeight: 512, maxFrames: 33 },
    });
    for (const m of [image, video]) {
      const dir = builtinModelDir(m.name, rootA);
      for (const file of [m.text.tokenizer, ...Object.values(m.files)]) {
        expect((await stat(path.join(dir, file))).isFile()).toBe(true);
      }
    }
  });

  it('write a WordPiece tokenizer of a few hundred words with [PAD] = 0', async () => {
    const tok = JSON.parse(await readFile(path.join(builtinModelDir(IMAGE, rootA), 'tokenizer.json'), 'utf8')) as {
      model: { type: string; vocab: Record<string, number> };
    };
    expect(tok.model.type).toBe('WordPiece');
    expect(tok.model.vocab['[PAD]']).toBe(0);
    expect(tok.model.vocab['[UNK]']).toBe(1);
    expect(SYNTHETIC_VOCABULARY.length).toBeGreaterThanOrEqual(200);
    for (const w of ['a', 'cat', 'red', 'sunset', 'cinematic']) expect(tok.model.vocab[w]).toBeGreaterThan(1);
  });
});

describe.each([
  { name: IMAGE, C: 4 },
  { name: VIDEO, C: 16 },
])('$name in onnxruntime-node', ({ name, C }) => {
  it('text encoder: input_ids [B, L] → last_hidden_state [B, L, 256]', async () => {
    const s = await session(name, 'text_encoder.onnx');
    try {
      for (const [B, L] of [
        [1, 32],
        [2, 7],
      ]) {
        const ids = BigInt64Array.from({ length: B * L }, (_, i) => BigInt(i % L < 5 ? 2 + ((i * 37) % 300) : 0));
        const out = await s.run({ input_ids: new ort.Tensor('int64', ids, [B, L]) });
        const h = out.last_hidden_state;
        expect(h.dims).toEqual([B, L, 256]);
        const st = stats(h.data as Float32Array);
        expect(st.finite).toBe(true);
        expect(st.std).toBeGreaterThan(0.3);
        expect(st.std).toBeLessThan(3);
      }
    } finally {
      await s.release();
    }
  });

  it('denoiser: sample [B, C, F, h, w] → out of the same shape at several sizes', async () => {
    const s = await session(name, 'denoiser.onnx');
    try {
      const video = name === VIDEO;
      const cases: Array<{ B: number; F: number; h: number; w: number }> = [
        { B: 1, F: 1, h: 16, w: 16 }, // 128×128
        { B: 2, F: video ? 3 : 1, h: 32, w: 24 }, // 256×192 (W×H = 192×256)
      ];
      for (const { B, F, h, w } of cases) {
        const sampleDims = [B, C, F, h, w];
        const feeds = {
          sample: f32(sampleDims, 1),
          timestep: new ort.Tensor(
            'float32',
            Float32Array.from({ length: B }, (_, i) => 999 - 400 * i),
            [B],
          ),
          encoder_hidden_states: f32([B, 32, 256], 2),
        };
        const out = (await s.run(feeds)).out;
        expect(out.dims).toEqual(sampleDims);
        const st = stats(out.data as Float32Array);
        expect(st.finite).toBe(true);
        // ~unit-scale predictions (noise or velocity), not collapsed and not exploding.
        expect(st.std).toBeGreaterThan(0.3);
        expect(st.std).toBeLessThan(3);
        // The timestep and the text condition the output.
        const other = (await s.run({ ...feeds, timestep: new ort.Tensor('float32', new Float32Array(B).fill(10), [B]) })).out
          .data as Float32Array;
        expect(maxAbsDiff(other, out.data as Float32Array)).toBeGreaterThan(1e-3);
        const otherText = (await s.run({ ...feeds, encoder_hidden_states: f32([B, 32, 256], 3) })).out.data as Float32Array;
        expect(maxAbsDiff(otherText, out.data as Float32Array)).toBeGreaterThan(1e-3);
      }
      // Shorter text than maxLength also works.
      const short = await s.run({
        sample: f32([1, C, 1, 16, 16], 4),
        timestep: new ort.Tensor('float32', Float32Array.of(500), [1]),
        encoder_hidden_states: f32([1, 5, 256], 5),
      });
      expect(short.out.dims).toEqual([1, C, 1, 16, 16]);
    } finally {
      await s.release();
    }
  });

  it('VAE decoder: latent [B, C, F, h, w] → sample [B, 3, frames, 8h, 8w] in [-1, 1]', async () => {
    const s = await session(name, 'vae_decoder.onnx');
    const manifest = await manifestOf(name);
    const tf = manifest.latent.temporalFactor;
    try {
      const video = name === VIDEO;
      const cases: Array<{ B: number; F: number; h: number; w: number }> = [
        { B: 1, F: 1, h: 16, w: 16 },
        { B: 2, F: video ? 3 : 1, h: 32, w: 24 },
      ];
      for (const { B, F, h, w } of cases) {
        const out = (await s.run({ latent: f32([B, C, F, h, w], 6) })).sample;
        const frames = tf === 1 ? F : tf * (F - 1) + 1;
        expect(out.dims).toEqual([B, 3, frames, 8 * h, 8 * w]);
        // The runtime's frame arithmetic agrees with the decoder.
        expect(latentFrames(frames, tf)).toBe(F);
        const st = stats(out.data as Float32Array);
        expect(st.finite).toBe(true);
        expect(st.min).toBeGreaterThanOrEqual(-1);
        expect(st.max).toBeLessThanOrEqual(1);
        expect(st.std).toBeGreaterThan(0.05);
      }
    } finally {
      await s.release();
    }
  });
});

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i += 1) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
