import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toUint8Image } from './analytic-vae.js';
import { meanAbsoluteError } from './layout-files.js';
import { buildSdxlDir, type SdxlTestModel } from './sdxl-layout.js';
import { clipTextForward } from './text-encoders.js';
import { eulerSchedule, maxAbsDiff, randn, runOnnx } from './test-helpers.js';

let root: string;
let dir: string;
let m: SdxlTestModel;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-sdxl-dir-'));
  dir = path.join(root, 'sdxl');
  m = await buildSdxlDir(dir, { scalingFactor: 0.5 });
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

const ids = (rows: number[][]) => new ort.Tensor('int32', Int32Array.from(rows.flat()), [rows.length, rows[0].length]);

/** Runs both encoders on the ONNX files and builds the UNet conditioning like diffusers. */
async function encode(prompts: string[]): Promise<{ ehs: Float32Array; pooled: Float32Array }> {
  const a = await runOnnx(path.join(dir, 'text_encoder', 'model.onnx'), { input_ids: ids(prompts.map((p) => m.promptIds(p))) });
  const b = await runOnnx(path.join(dir, 'text_encoder_2', 'model.onnx'), { input_ids: ids(prompts.map((p) => m.promptIds2(p))) });
  // hidden_states[-2] = `hidden_states.{N-1}` for N = num_hidden_layers (2 here).
  const h1 = a['hidden_states.1'].data as Float32Array;
  const h2 = b['hidden_states.1'].data as Float32Array;
  const D1 = 32;
  const D2 = 48;
  const rows = prompts.length * 77;
  const ehs = new Float32Array(rows * (D1 + D2));
  for (let r = 0; r < rows; r += 1) {
    ehs.set(h1.subarray(r * D1, (r + 1) * D1), r * (D1 + D2));
    ehs.set(h2.subarray(r * D2, (r + 1) * D2), r * (D1 + D2) + D1);
  }
  return { ehs, pooled: b.text_embeds.data as Float32Array };
}

describe('SDXL layout', () => {
  it('has the optimum names: two CLIP encoders with hidden states, UNet with text_embeds and time_ids', async () => {
    const names = async (c: string) => {
      const s = await ort.InferenceSession.create(path.join(dir, c, 'model.onnx'));
      const r = [s.inputNames, s.outputNames];
      await s.release();
      return r;
    };
    expect(await names('text_encoder')).toEqual([
      ['input_ids'],
      ['last_hidden_state', 'pooler_output', 'hidden_states.0', 'hidden_states.1', 'hidden_states.2'],
    ]);
    expect(await names('text_encoder_2')).toEqual([
      ['input_ids'],
      ['text_embeds', 'last_hidden_state', 'hidden_states.0', 'hidden_states.1', 'hidden_states.2'],
    ]);
    expect(await names('unet')).toEqual([['sample', 'timestep', 'encoder_hidden_states', 'text_embeds', 'time_ids'], ['out_sample']]);
    const index = JSON.parse(await readFile(path.join(dir, 'model_index.json'), 'utf8'));
    expect(index).toMatchObject({ _class_name: 'StableDiffusionXLPipeline', force_zeros_for_empty_prompt: true });
    const unet = JSON.parse(await readFile(path.join(dir, 'unet/config.json'), 'utf8'));
    expect(unet).toMatchObject({
      cross_attention_dim: 80,
      addition_embed_type: 'text_time',
      projection_class_embeddings_input_dim: 32 + 6 * 256,
    });
    const tc2 = JSON.parse(await readFile(path.join(dir, 'tokenizer_2/tokenizer_config.json'), 'utf8'));
    expect(tc2.pad_token).toBe('!');
  });

  it('text encoders match the closed form; the conditioning matches diffusers penultimate-layer concat', async () => {
    const { ehs, pooled } = await encode(['a purple flower']);
    const want = m.conditioning('a purple flower');
    expect(maxAbsDiff(ehs, want.promptEmbeds)).toBeLessThan(1e-5);
    expect(maxAbsDiff(pooled, want.pooled)).toBeLessThan(1e-5);
    // Penultimate ≠ last: a stage that used last_hidden_state would feed other values.
    const last = clipTextForward(m.text1, m.promptIds('a purple flower')).lastHiddenState;
    expect(maxAbsDiff(last, want.promptEmbeds.subarray(0, last.length))).toBeGreaterThan(0.01);
  });

  it('text_embeds and time_ids reach the graph and change the clean latent', async () => {
    const c = m.conditioning('a red car');
    const tid = m.timeIds(64, 64);
    const base = m.cleanLatent(c, tid, 8, 8);
    expect(maxAbsDiff(base, m.cleanLatent({ ...c, pooled: new Float32Array(32) }, tid, 8, 8))).toBeGreaterThan(0.02);
    expect(maxAbsDiff(base, m.cleanLatent(c, [0, 0, 0, 0, 0, 0], 8, 8))).toBeGreaterThan(0.1);
    expect(maxAbsDiff(base, m.cleanLatent(c, [64, 64, 0, 0, 64, 32], 8, 8))).toBeGreaterThan(0.02);
    // The ONNX UNet at t = 999 with sample = 0: ε = −√ᾱ·x0/√(1−ᾱ), so x0 is recoverable from ε.
    const run = async (te: Float32Array, timeIds: number[]) =>
      (
        await runOnnx(path.join(dir, 'unet', 'model.onnx'), {
          sample: new ort.Tensor('float32', new Float32Array(256), [1, 4, 8, 8]),
          timestep: new ort.Tensor('int64', BigInt64Array.from([999n]), []),
          encoder_hidden_states: new ort.Tensor('float32', c.promptEmbeds, [1, 77, 80]),
          text_embeds: new ort.Tensor('float32', te, [1, 32]),
          time_ids: new ort.Tensor('float32', Float32Array.from(timeIds), [1, 6]),
        })
      ).out_sample.data as Float32Array;
    const good = await run(c.pooled, tid);
    const noPooled = await run(new Float32Array(32), tid);
    const noTime = await run(c.pooled, [0, 0, 0, 0, 0, 0]);
    expect(maxAbsDiff(good, noPooled)).toBeGreaterThan(1e-3);
    expect(maxAbsDiff(good, noTime)).toBeGreaterThan(1e-3);
  });

  it('an Euler loop with CFG (no negative prompt → zeros) on the ONNX files lands on expectedImage', async () => {
    const prompt = 'a photo of a yellow house';
    const g = 2;
    const pos = await encode([prompt]);
    const L = 77;
    const D = 80;
    const ehs = new Float32Array(2 * L * D); // row 0 = zeros (force_zeros_for_empty_prompt), row 1 = prompt
    ehs.set(pos.ehs, L * D);
    const te = new Float32Array(64);
    te.set(pos.pooled, 32);
    const tid = Float32Array.from([...m.timeIds(64, 64), ...m.timeIds(64, 64)]);
    const unet = await ort.InferenceSession.create(path.join(dir, 'unet', 'model.onnx'));
    const sched = eulerSchedule(m.schedulerConfig, 8, false);
    let x = randn(256, 11).map((v) => v * sched[0].sigma);
    for (let i = 0; i < 8; i += 1) {
      const { sigma, t } = sched[i];
      const xin = x.map((v) => v / Math.sqrt(sigma * sigma + 1));
      const both = new Float32Array(512);
      both.set(xin, 0);
      both.set(xin, 256);
      const out = (
        await unet.run({
          sample: new ort.Tensor('float32', both, [2, 4, 8, 8]),
          timestep: new ort.Tensor('int64', BigInt64Array.from([BigInt(t)]), []),
          encoder_hidden_states: new ort.Tensor('float32', ehs, [2, L, D]),
          text_embeds: new ort.Tensor('float32', te, [2, 32]),
          time_ids: new ort.Tensor('float32', tid, [2, 6]),
        })
      ).out_sample.data as Float32Array;
      const eps = out.subarray(0, 256).map((u, k) => u + g * (out[256 + k] - u));
      x = x.map((v, k) => v + eps[k] * (sched[i + 1].sigma - sigma));
    }
    await unet.release();
    const dec = await runOnnx(path.join(dir, 'vae_decoder', 'model.onnx'), {
      latent_sample: new ort.Tensor(
        'float32',
        x.map((v) => v / 0.5),
        [1, 4, 8, 8],
      ),
    });
    const got = toUint8Image(dec.sample.data as Float32Array, 64, 64);
    const want = m.expectedImage({ prompt, guidanceScale: g });
    expect(meanAbsoluteError(got, want.data)).toBeLessThan(0.6);
    // An explicit '' negative prompt is encoded (not zeros) and gives another picture.
    expect(meanAbsoluteError(m.expectedImage({ prompt, negativePrompt: '', guidanceScale: g }).data, want.data)).toBeGreaterThan(1);
  });
});
