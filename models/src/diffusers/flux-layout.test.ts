import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latentImageIds, packLatents, unpackLatents } from './analytic-flux.js';
import { toUint8Image } from './analytic-vae.js';
import { buildFluxDir, type FluxTestModel } from './flux-layout.js';
import { meanAbsoluteError } from './layout-files.js';
import { fromFloat16, toFloat16 } from '@diffmesh/tensor-client';
import { maxAbsDiff, randn, runOnnx } from './test-helpers.js';

let root: string;
let dir: string;
let m: FluxTestModel;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-flux-dir-'));
  dir = path.join(root, 'flux');
  m = await buildFluxDir(dir, { scalingFactor: 0.5, shiftFactor: 0.2 });
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

/** FlowMatchEulerDiscreteScheduler with use_dynamic_shifting, as FluxPipeline sets it up. */
function flowSigmas(steps: number, imageSeqLen: number): number[] {
  const m1 = (1.15 - 0.5) / (4096 - 256);
  const mu = imageSeqLen * m1 + (0.5 - m1 * 256);
  const out: number[] = [];
  for (let i = 0; i < steps; i += 1) {
    const s = 1 + ((1 / steps - 1) * i) / (steps - 1); // linspace(1, 1/steps, steps)
    out.push(Math.exp(mu) / (Math.exp(mu) + (1 / s - 1)));
  }
  out.push(0);
  return out;
}

async function generate(prompt: string, guidance: number, imgIds?: Float32Array): Promise<Uint8Array> {
  const h = 8;
  const w = 8;
  const S = (h / 2) * (w / 2);
  const T = 512;
  const clip = await runOnnx(path.join(dir, 'text_encoder', 'model.onnx'), {
    input_ids: new ort.Tensor('int32', Int32Array.from(m.promptIds(prompt)), [1, 77]),
  });
  const t5 = await runOnnx(path.join(dir, 'text_encoder_2', 'model.onnx'), {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(m.promptIdsT5(prompt, T).map(BigInt)), [1, T]),
  });
  const transformer = await ort.InferenceSession.create(path.join(dir, 'transformer', 'model.onnx'));
  const sigmas = flowSigmas(4, S);
  let x = packLatents(randn(16 * h * w, 5), 16, h, w);
  for (let i = 0; i < 4; i += 1) {
    const out = await transformer.run({
      hidden_states: new ort.Tensor('float32', x, [1, S, 64]),
      encoder_hidden_states: t5.last_hidden_state,
      pooled_projections: clip.pooler_output,
      timestep: new ort.Tensor('float32', Float32Array.from([sigmas[i]]), [1]), // (σ·1000) / 1000
      txt_ids: new ort.Tensor('float32', new Float32Array(T * 3), [T, 3]),
      img_ids: new ort.Tensor('float32', imgIds ?? latentImageIds(h, w), [S, 3]),
      guidance: new ort.Tensor('float32', Float32Array.from([guidance]), [1]),
    });
    const v = out.out_hidden_states.data as Float32Array;
    x = x.map((xi, k) => xi + (sigmas[i + 1] - sigmas[i]) * v[k]);
  }
  await transformer.release();
  const z = unpackLatents(x, 16, h, w).map((v) => v / 0.5 + 0.2);
  const dec = await runOnnx(path.join(dir, 'vae_decoder', 'model.onnx'), { latent_sample: new ort.Tensor('float32', z, [1, 16, h, w]) });
  return toUint8Image(dec.sample.data as Float32Array, 8 * h, 8 * w);
}

describe('FLUX layout', () => {
  it('has the optimum names and FLUX configs', async () => {
    const names = async (c: string) => {
      const s = await ort.InferenceSession.create(path.join(dir, c, 'model.onnx'));
      const r = [s.inputNames, s.outputNames];
      await s.release();
      return r;
    };
    expect(await names('transformer')).toEqual([
      ['hidden_states', 'encoder_hidden_states', 'pooled_projections', 'timestep', 'txt_ids', 'img_ids', 'guidance'],
      ['out_hidden_states'],
    ]);
    expect(await names('text_encoder_2')).toEqual([['input_ids'], ['last_hidden_state']]);
    expect(await names('text_encoder')).toEqual([['input_ids'], ['last_hidden_state', 'pooler_output']]);
    const vae = JSON.parse(await readFile(path.join(dir, 'vae_decoder/config.json'), 'utf8'));
    expect(vae).toMatchObject({ latent_channels: 16, scaling_factor: 0.5, shift_factor: 0.2 });
    const sched = JSON.parse(await readFile(path.join(dir, 'scheduler/scheduler_config.json'), 'utf8'));
    expect(sched).toMatchObject({
      _class_name: 'FlowMatchEulerDiscreteScheduler',
      use_dynamic_shifting: true,
      base_shift: 0.5,
      max_shift: 1.15,
    });
    const index = JSON.parse(await readFile(path.join(dir, 'model_index.json'), 'utf8'));
    expect(index).toMatchObject({ _class_name: 'FluxPipeline', tokenizer_2: ['transformers', 'T5TokenizerFast'] });
  });

  it('pack/unpack follow diffusers and img_ids are (0, row, col)', () => {
    const z = Float32Array.from({ length: 16 * 4 * 4 }, (_, i) => i);
    const p = packLatents(z, 16, 4, 4);
    // token 1 = rows 0–1, cols 2–3; channel 0 at (dy, dx) = (1, 0) is z[0, 1, 2]
    expect(p[1 * 64 + 2]).toBe(z[1 * 4 + 2]);
    expect(unpackLatents(p, 16, 4, 4)).toEqual(z);
    expect(Array.from(latentImageIds(4, 4))).toEqual([0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1]);
  });

  it('the transformer returns the exact velocity', async () => {
    const S = 16;
    const x = randn(S * 64, 9);
    const sigma = 0.37;
    const out = await runOnnx(path.join(dir, 'transformer', 'model.onnx'), {
      hidden_states: new ort.Tensor('float32', x, [1, S, 64]),
      encoder_hidden_states: new ort.Tensor('float32', m.t5Embeds('a red car', 32), [1, 32, 32]),
      pooled_projections: new ort.Tensor('float32', m.pooledEmbeds('a red car'), [1, 32]),
      timestep: new ort.Tensor('float32', Float32Array.from([sigma]), [1]),
      txt_ids: new ort.Tensor('float32', new Float32Array(32 * 3), [32, 3]),
      img_ids: new ort.Tensor('float32', latentImageIds(8, 8), [S, 3]),
      guidance: new ort.Tensor('float32', Float32Array.from([3.5]), [1]),
    });
    const x0 = m.expectedLatent({ prompt: 'a red car', guidanceScale: 3.5 }).packed;
    const want = x.map((xi, k) => (xi - x0[k]) / sigma);
    expect(maxAbsDiff(out.out_hidden_states.data as Float32Array, want)).toBeLessThan(1e-4);
  });

  it('a dynamic-shift flow Euler loop on the ONNX files lands on expectedImage; img_ids and guidance matter', async () => {
    const got = await generate('a photo of a blue sea', 3.5);
    const want = m.expectedImage({ prompt: 'a photo of a blue sea', guidanceScale: 3.5 });
    expect(meanAbsoluteError(got, want.data)).toBeLessThan(0.6);
    const zeroIds = await generate('a photo of a blue sea', 3.5, new Float32Array(16 * 3));
    expect(meanAbsoluteError(zeroIds, want.data)).toBeGreaterThan(3);
    expect(meanAbsoluteError(m.expectedImage({ prompt: 'a photo of a blue sea', guidanceScale: 1 }).data, want.data)).toBeGreaterThan(3);
    expect(meanAbsoluteError(m.expectedImage({ prompt: 'a photo of a red sea', guidanceScale: 3.5 }).data, want.data)).toBeGreaterThan(10);
  });

  it('fp16 and no-guidance (schnell-style) variants', async () => {
    const d = path.join(root, 'flux-fp16');
    const f = await buildFluxDir(d, { precision: 'fp16', guidanceEmbeds: false });
    const s = await ort.InferenceSession.create(path.join(d, 'transformer', 'model.onnx'));
    expect(s.inputNames).not.toContain('guidance');
    const x = randn(16 * 64, 2);
    const sigma = 0.6;
    const h16 = (a: Float32Array, dims: number[]) => new ort.Tensor('float16', toFloat16(a), dims);
    const out = await s.run({
      hidden_states: h16(x, [1, 16, 64]),
      encoder_hidden_states: h16(f.t5Embeds('green sky', 16), [1, 16, 32]),
      pooled_projections: h16(f.pooledEmbeds('green sky'), [1, 32]),
      timestep: h16(Float32Array.from([sigma]), [1]),
      txt_ids: h16(new Float32Array(48), [16, 3]),
      img_ids: h16(latentImageIds(8, 8), [16, 3]),
    });
    await s.release();
    expect(out.out_hidden_states.type).toBe('float16');
    const x0 = f.expectedLatent({ prompt: 'green sky', guidanceScale: 3.5 }).packed; // guidance is ignored without the input
    const want = x.map((xi, k) => (xi - x0[k]) / sigma);
    expect(maxAbsDiff(fromFloat16(out.out_hidden_states.data as Uint16Array), want)).toBeLessThan(2e-2);
  });
});
