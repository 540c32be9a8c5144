import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toUint8Image } from './analytic-vae.js';
import { meanAbsoluteError } from './layout-files.js';
import { buildSd3Dir, type Sd3TestModel } from './sd3-layout.js';
import { maxAbsDiff, randn, runOnnx } from './test-helpers.js';

let root: string;
let dir: string;
let m: Sd3TestModel;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-sd3-dir-'));
  dir = path.join(root, 'sd3');
  m = await buildSd3Dir(dir, { scalingFactor: 0.5, shiftFactor: 0.2 });
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

const int32 = (rows: number[][]) => new ort.Tensor('int32', Int32Array.from(rows.flat()), [rows.length, rows[0].length]);

/** encode_prompt on the ONNX files for [negative, prompt]: [2, 77 + 256, 96] and [2, 80]. */
async function encode(prompts: string[]): Promise<{ ehs: Float32Array; pooled: Float32Array }> {
  const a = await runOnnx(path.join(dir, 'text_encoder', 'model.onnx'), { input_ids: int32(prompts.map((p) => m.promptIds(p))) });
  const b = await runOnnx(path.join(dir, 'text_encoder_2', 'model.onnx'), { input_ids: int32(prompts.map((p) => m.promptIds2(p))) });
  const t5ids = prompts.flatMap((p) => m.promptIds3(p, 256));
  const c = await runOnnx(path.join(dir, 'text_encoder_3', 'model.onnx'), {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(t5ids.map(BigInt)), [prompts.length, 256]),
  });
  const B = prompts.length;
  const rows = 77 + 256;
  const ehs = new Float32Array(B * rows * 96);
  const pooled = new Float32Array(B * 80);
  const hA = a['hidden_states.1'].data as Float32Array;
  const hB = b['hidden_states.1'].data as Float32Array;
  const t5 = c.last_hidden_state.data as Float32Array;
  for (let i = 0; i < B; i += 1) {
    for (let l = 0; l < 77; l += 1) {
      ehs.set(hA.subarray((i * 77 + l) * 32, (i * 77 + l + 1) * 32), (i * rows + l) * 96);
      ehs.set(hB.subarray((i * 77 + l) * 48, (i * 77 + l + 1) * 48), (i * rows + l) * 96 + 32);
    }
    ehs.set(t5.subarray(i * 256 * 96, (i + 1) * 256 * 96), (i * rows + 77) * 96);
    pooled.set((a.text_embeds.data as Float32Array).subarray(i * 32, (i + 1) * 32), i * 80);
    pooled.set((b.text_embeds.data as Float32Array).subarray(i * 48, (i + 1) * 48), i * 80 + 32);
  }
  return { ehs, pooled };
}

describe('SD3 layout', () => {
  it('has the optimum names', async () => {
    const s = await ort.InferenceSession.create(path.join(dir, 'transformer', 'model.onnx'));
    expect([s.inputNames, s.outputNames]).toEqual([
      ['hidden_states', 'encoder_hidden_states', 'pooled_projections', 'timestep'],
      ['out_hidden_states'],
    ]);
    await s.release();
    const index = JSON.parse(await readFile(path.join(dir, 'model_index.json'), 'utf8'));
    expect(index).toMatchObject({ _class_name: 'StableDiffusion3Pipeline', text_encoder_3: ['transformers', 'T5EncoderModel'] });
  });

  it("the ONNX encoders give encode_prompt's conditioning", async () => {
    const { ehs, pooled } = await encode(['a green tree']);
    const want = m.conditioning('a green tree');
    expect(maxAbsDiff(ehs, want.promptEmbeds)).toBeLessThan(1e-5);
    expect(maxAbsDiff(pooled, want.pooled)).toBeLessThan(1e-5);
  });

  it('a shifted flow Euler loop with CFG (timestep = σ·1000) lands on expectedImage', async () => {
    const prompt = 'a photo of an orange flower';
    const g = 2.5;
    const { ehs, pooled } = await encode(['', prompt]);
    const steps = 5;
    const sigmas: number[] = [];
    for (let i = 0; i < steps; i += 1) {
      const s = 1 + ((1 / steps - 1) * i) / (steps - 1);
      sigmas.push((3 * s) / (1 + 2 * s)); // shift 3
    }
    sigmas.push(0);
    const tr = await ort.InferenceSession.create(path.join(dir, 'transformer', 'model.onnx'));
    const n = 16 * 64;
    let x = randn(n, 21);
    for (let i = 0; i < steps; i += 1) {
      const both = new Float32Array(2 * n);
      both.set(x, 0);
      both.set(x, n);
      const out = (
        await tr.run({
          hidden_states: new ort.Tensor('float32', both, [2, 16, 8, 8]),
          encoder_hidden_states: new ort.Tensor('float32', ehs, [2, 333, 96]),
          pooled_projections: new ort.Tensor('float32', pooled, [2, 80]),
          timestep: new ort.Tensor('float32', Float32Array.from([sigmas[i] * 1000, sigmas[i] * 1000]), [2]),
        })
      ).out_hidden_states.data as Float32Array;
      x = x.map((xi, k) => xi + (sigmas[i + 1] - sigmas[i]) * (out[k] + g * (out[n + k] - out[k])));
    }
    await tr.release();
    const dec = await runOnnx(path.join(dir, 'vae_decoder', 'model.onnx'), {
      latent_sample: new ort.Tensor(
        'float32',
        x.map((v) => v / 0.5 + 0.2),
        [1, 16, 8, 8],
      ),
    });
    const got = toUint8Image(dec.sample.data as Float32Array, 64, 64);
    const want = m.expectedImage({ prompt, negativePrompt: '', guidanceScale: g });
    expect(meanAbsoluteError(got, want.data)).toBeLessThan(0.6);
    expect(meanAbsoluteError(m.expectedImage({ prompt: 'a photo of a blue flower', guidanceScale: g }).data, want.data)).toBeGreaterThan(
      10,
    );
  });
});
