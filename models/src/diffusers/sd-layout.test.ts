import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unetCleanLatent, unetMeaningSums, UNET_PATTERN_AMP } from './analytic-unet.js';
import { toUint8Image, vaeDecode } from './analytic-vae.js';
import { clipVocab } from './clip-tokenizer-files.js';
import { fromFloat16, toFloat16 } from '@diffmesh/tensor-client';
import { meanAbsoluteError } from './layout-files.js';
import { buildSdDir, type SdDirOptions, type SdTestModel } from './sd-layout.js';
import { clipTextForward } from './text-encoders.js';
import { eulerSchedule, maxAbsDiff, randn, runOnnx } from './test-helpers.js';
import { alphaSigmaAt, logSigmas } from './training-schedule.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-sd-dir-'));
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

let counter = 0;
async function build(opts: SdDirOptions = {}): Promise<{ dir: string; m: SdTestModel }> {
  counter += 1;
  const dir = path.join(root, `m${counter}`);
  const m = await buildSdDir(dir, opts);
  return { dir, m };
}

function idsTensor(m: SdTestModel, prompts: string[]): ort.Tensor {
  const L = m.options.maxLength;
  const flat = prompts.flatMap((p) => m.promptIds(p));
  return m.options.idsType === 'int32'
    ? new ort.Tensor('int32', Int32Array.from(flat), [prompts.length, L])
    : new ort.Tensor('int64', BigInt64Array.from(flat.map(BigInt)), [prompts.length, L]);
}

function timestepTensor(m: SdTestModel, t: number, batch = 1): ort.Tensor {
  const dims = m.options.timestepShape === 'scalar' ? [] : [batch];
  const vals = new Array<number>(batch).fill(t);
  switch (m.options.timestepType) {
    case 'int64':
      return new ort.Tensor('int64', BigInt64Array.from(vals.map((v) => BigInt(Math.trunc(v)))), dims);
    case 'int32':
      return new ort.Tensor('int32', Int32Array.from(vals.map(Math.trunc)), dims);
    case 'float16':
      return new ort.Tensor('float16', toFloat16(vals), dims);
    default:
      return new ort.Tensor('float32', Float32Array.from(vals), dims);
  }
}

function floatTensor(m: SdTestModel, data: Float32Array, dims: number[]): ort.Tensor {
  return m.options.precision === 'fp16' ? new ort.Tensor('float16', toFloat16(data), dims) : new ort.Tensor('float32', data, dims);
}

function floats(t: ort.Tensor): Float32Array {
  return t.type === 'float16' ? fromFloat16(t.data as Uint16Array) : (t.data as Float32Array);
}

/** Closed-form UNet output for one batch item. */
function closedForm(m: SdTestModel, x: Float32Array, t: number, ehs: Float32Array, h: number, w: number): Float32Array {
  const z0 = unetCleanLatent(unetMeaningSums(m.unet, ehs), UNET_PATTERN_AMP, h, w).map((u) => u * m.options.scalingFactor);
  const { sqrtAlphaBar: sa, sqrtOneMinus: s1 } = alphaSigmaAt(logSigmas(m.schedulerConfig), t);
  return x.map((xi, i) => {
    const eps = (xi - sa * z0[i]) / s1;
    if (m.options.predictionType === 'epsilon') return eps;
    if (m.options.predictionType === 'v_prediction') return sa * eps - s1 * z0[i];
    return z0[i];
  });
}

/** A diffusers-style Euler loop with CFG on the built ONNX files; returns the decoded uint8 picture. */
async function generate(
  dir: string,
  m: SdTestModel,
  prompt: string,
  negative: string,
  g: number,
  steps: number,
  karras: boolean | 'linspace',
): Promise<Uint8Array> {
  const h = m.options.sampleSize;
  const w = h;
  const n = 4 * h * w;
  const te = await runOnnx(path.join(dir, 'text_encoder', 'model.onnx'), { input_ids: idsTensor(m, [negative, prompt]) });
  const ehs = te.last_hidden_state;
  const unet = await ort.InferenceSession.create(path.join(dir, 'unet', 'model.onnx'));
  const sched = eulerSchedule(m.schedulerConfig, steps, karras);
  let x = randn(n, 7).map((v) => v * sched[0].sigma);
  for (let i = 0; i < steps; i += 1) {
    const { sigma, t } = sched[i];
    const xin = x.map((v) => v / Math.sqrt(sigma * sigma + 1));
    const both = new Float32Array(2 * n);
    both.set(xin, 0);
    both.set(xin, n);
    const out = floats(
      (
        await unet.run({
          sample: floatTensor(m, both, [2, 4, h, w]),
          timestep: timestepTensor(m, t),
          encoder_hidden_states: ehs,
        })
      ).out_sample,
    );
    const pred = out.subarray(0, n).map((u, k) => u + g * (out[n + k] - u));
    const denoised =
      m.options.predictionType === 'v_prediction'
        ? pred.map((v, k) => v * (-sigma / Math.sqrt(sigma * sigma + 1)) + x[k] / (sigma * sigma + 1))
        : pred.map((e, k) => x[k] - sigma * e);
    const next = sched[i + 1].sigma;
    x = x.map((v, k) => v + ((v - denoised[k]) / sigma) * (next - sigma));
  }
  await unet.release();
  const u = x.map((v) => v / m.options.scalingFactor);
  const dec = await runOnnx(path.join(dir, 'vae_decoder', 'model.onnx'), { latent_sample: floatTensor(m, u, [1, 4, h, w]) });
  return toUint8Image(floats(dec.sample), 8 * h, 8 * w);
}

describe('SD 1.x layout', () => {
  let dir: string;
  let m: SdTestModel;
  beforeAll(async () => {
    ({ dir, m } = await build({ scalingFactor: 0.5 }));
  });

  it('writes the diffusers/optimum files', async () => {
    for (const f of [
      'model_index.json',
      'scheduler/scheduler_config.json',
      'tokenizer/vocab.json',
      'tokenizer/merges.txt',
      'tokenizer/tokenizer_config.json',
      'tokenizer/special_tokens_map.json',
      'text_encoder/model.onnx',
      'text_encoder/config.json',
      'unet/model.onnx',
      'unet/config.json',
      'vae_decoder/model.onnx',
      'vae_decoder/config.json',
      'vae_encoder/model.onnx',
      'vae_encoder/config.json',
    ]) {
      expect(existsSync(path.join(dir, f)), f).toBe(true);
    }
    expect(existsSync(path.join(dir, 'tokenizer/tokenizer.json'))).toBe(false);
    const index = JSON.parse(await readFile(path.join(dir, 'model_index.json'), 'utf8'));
    expect(index._class_name).toBe('StableDiffusionPipeline');
    expect(index.unet).toEqual(['diffusers', 'UNet2DConditionModel']);
    const vae = JSON.parse(await readFile(path.join(dir, 'vae_decoder/config.json'), 'utf8'));
    expect(vae.scaling_factor).toBe(0.5);
    const tc = JSON.parse(await readFile(path.join(dir, 'tokenizer/tokenizer_config.json'), 'utf8'));
    expect(tc.pad_token).toBe('<|endoftext|>');
    expect(tc.model_max_length).toBe(77);
  });

  it('has the optimum input/output names, dtypes and shapes', async () => {
    const meta = async (c: string) => {
      const s = await ort.InferenceSession.create(path.join(dir, c, 'model.onnx'));
      const r = { inputs: s.inputNames, outputs: s.outputNames };
      await s.release();
      return r;
    };
    expect(await meta('text_encoder')).toEqual({ inputs: ['input_ids'], outputs: ['last_hidden_state', 'pooler_output'] });
    expect(await meta('unet')).toEqual({ inputs: ['sample', 'timestep', 'encoder_hidden_states'], outputs: ['out_sample'] });
    expect(await meta('vae_decoder')).toEqual({ inputs: ['latent_sample'], outputs: ['sample'] });
    expect(await meta('vae_encoder')).toEqual({ inputs: ['sample'], outputs: ['latent_parameters'] });
  });

  it('text encoder outputs equal the closed form (int32 ids, batch 2)', async () => {
    const prompts = ['a photo of a red cat', ''];
    const out = await runOnnx(path.join(dir, 'text_encoder', 'model.onnx'), { input_ids: idsTensor(m, prompts) });
    const D = m.options.hiddenSize;
    const L = m.options.maxLength;
    expect(out.last_hidden_state.dims).toEqual([2, L, D]);
    expect(out.pooler_output.dims).toEqual([2, D]);
    prompts.forEach((p, b) => {
      const ref = clipTextForward(m.textWeights, m.promptIds(p));
      const got = (out.last_hidden_state.data as Float32Array).subarray(b * L * D, (b + 1) * L * D);
      expect(maxAbsDiff(got, ref.lastHiddenState)).toBeLessThan(1e-5);
      expect(maxAbsDiff((out.pooler_output.data as Float32Array).subarray(b * D, (b + 1) * D), ref.pooled)).toBeLessThan(1e-5);
    });
    // Pooled = the EOS position: the prompt's meaning reaches it (red > green on dim 0 vs 1).
    const red = clipTextForward(m.textWeights, m.promptIds('red')).pooled;
    expect(red[0]).toBeGreaterThan(red[1]);
  });

  it('UNet returns the exact epsilon at integer and fractional timesteps, batch 2 with a scalar timestep', async () => {
    const h = 8;
    const w = 8;
    const n = 4 * h * w;
    const L = m.options.maxLength;
    const D = m.options.hiddenSize;
    const e0 = m.promptEmbeds('a blue dog');
    const e1 = m.promptEmbeds('');
    const ehs = new Float32Array(2 * L * D);
    ehs.set(e0, 0);
    ehs.set(e1, L * D);
    const x = randn(2 * n, 3);
    for (const t of [999, 500, 1, 0]) {
      const out = await runOnnx(path.join(dir, 'unet', 'model.onnx'), {
        sample: new ort.Tensor('float32', x, [2, 4, h, w]),
        timestep: timestepTensor(m, t),
        encoder_hidden_states: new ort.Tensor('float32', ehs, [2, L, D]),
      });
      const got = out.out_sample.data as Float32Array;
      const ref0 = closedForm(m, x.subarray(0, n), t, e0, h, w);
      const ref1 = closedForm(m, x.subarray(n), t, e1, h, w);
      const scale = Math.max(1, ...Array.from(ref0, Math.abs));
      expect(maxAbsDiff(got.subarray(0, n), ref0) / scale, `t=${t}`).toBeLessThan(2e-4);
      expect(maxAbsDiff(got.subarray(n), ref1) / scale, `t=${t}`).toBeLessThan(2e-4);
    }
  });

  it('prompt matters: the two prompts give different clean latents and pictures', () => {
    const a = m.expectedImage({ prompt: 'a red cat', guidanceScale: 1 });
    const b = m.expectedImage({ prompt: 'a blue cat', guidanceScale: 1 });
    expect(a.width).toBe(64);
    expect(a.data.length).toBe(64 * 64 * 3);
    expect(meanAbsoluteError(a.data, b.data)).toBeGreaterThan(20);
    // red prompt: the red channel dominates at the centre
    const centre = (32 * 64 + 32) * 3;
    expect(a.data[centre]).toBeGreaterThan(a.data[centre + 2] + 40);
    expect(b.data[centre + 2]).toBeGreaterThan(b.data[centre] + 40);
  });

  it('an Euler loop with CFG on the ONNX files lands on expectedImage; a wrong scaling factor does not', async () => {
    const req = { prompt: 'a photo of a red cat', negativePrompt: 'blurry', guidanceScale: 3 };
    const got = await generate(dir, m, req.prompt, req.negativePrompt, req.guidanceScale, 12, false);
    const want = m.expectedImage(req);
    expect(meanAbsoluteError(got, want.data)).toBeLessThan(0.6);
    // The same latent decoded with SD's default 0.18215 instead of this directory's 0.5:
    const { latent, h, w } = m.expectedLatent(req);
    const wrong = toUint8Image(
      vaeDecode(
        latent.map((v) => v / 0.18215),
        4,
        h,
        w,
      ),
      64,
      64,
    );
    expect(meanAbsoluteError(wrong, want.data)).toBeGreaterThan(15);
    // No guidance gives another picture.
    expect(meanAbsoluteError(m.expectedImage({ ...req, guidanceScale: 1 }).data, want.data)).toBeGreaterThan(5);
  });

  it('VAE encoder is the left inverse of the decoder on block-constant pictures', async () => {
    const h = 2;
    const w = 3;
    const u = new Float32Array(4 * h * w);
    for (let i = 0; i < 3 * h * w; i += 1) u[i] = Math.sin(i) * 0.7; // channel 3 = 0
    const dec = await runOnnx(path.join(dir, 'vae_decoder', 'model.onnx'), { latent_sample: new ort.Tensor('float32', u, [1, 4, h, w]) });
    expect(dec.sample.dims).toEqual([1, 3, 16, 24]);
    expect(maxAbsDiff(dec.sample.data as Float32Array, vaeDecode(u, 4, h, w))).toBeLessThan(1e-6);
    const enc = await runOnnx(path.join(dir, 'vae_encoder', 'model.onnx'), { sample: dec.sample });
    expect(enc.latent_parameters.dims).toEqual([1, 8, h, w]);
    const params = enc.latent_parameters.data as Float32Array;
    expect(maxAbsDiff(params.subarray(0, 4 * h * w), u)).toBeLessThan(1e-6);
    expect(params[4 * h * w]).toBe(-30);
  });
});

describe('SD variants', () => {
  it('sd2: v_prediction, "!" padding, Karras sigmas with a float32 timestep land exactly', async () => {
    const { dir, m } = await build({ variant: 'sd2', timestepType: 'float32', scalingFactor: 0.5, scheduler: { use_karras_sigmas: true } });
    const tc = JSON.parse(await readFile(path.join(dir, 'tokenizer/tokenizer_config.json'), 'utf8'));
    expect(tc.pad_token).toBe('!');
    expect(m.promptIds('a cat').slice(0, 6)).toEqual([
      clipVocab().bosId,
      clipVocab().vocab['a</w>'],
      clipVocab().vocab['cat</w>'],
      clipVocab().eosId,
      0,
      0,
    ]);
    const sched = JSON.parse(await readFile(path.join(dir, 'scheduler/scheduler_config.json'), 'utf8'));
    expect(sched).toMatchObject({ _class_name: 'DDIMScheduler', prediction_type: 'v_prediction', use_karras_sigmas: true });
    const req = { prompt: 'green forest', negativePrompt: '', guidanceScale: 2.5 };
    const got = await generate(dir, m, req.prompt, req.negativePrompt, req.guidanceScale, 10, true);
    expect(meanAbsoluteError(got, m.expectedImage(req).data)).toBeLessThan(0.6);
  });

  it('fp16 model with a float16 vector timestep fed [1] for batch 2', async () => {
    const { dir, m } = await build({ precision: 'fp16', timestepType: 'float16', timestepShape: 'vector' });
    const s = await ort.InferenceSession.create(path.join(dir, 'unet', 'model.onnx'));
    expect(s.inputNames).toEqual(['sample', 'timestep', 'encoder_hidden_states']);
    await s.release();
    const te = await runOnnx(path.join(dir, 'text_encoder', 'model.onnx'), { input_ids: idsTensor(m, ['', 'yellow flower']) });
    expect(te.last_hidden_state.type).toBe('float16');
    const x = randn(2 * 256, 5);
    const out = await runOnnx(path.join(dir, 'unet', 'model.onnx'), {
      sample: new ort.Tensor('float16', toFloat16(x), [2, 4, 8, 8]),
      timestep: timestepTensor(m, 400, 1),
      encoder_hidden_states: te.last_hidden_state,
    });
    expect(out.out_sample.type).toBe('float16');
    const got = floats(out.out_sample);
    const ref = closedForm(m, x.subarray(256), 400, m.promptEmbeds('yellow flower'), 8, 8);
    expect(maxAbsDiff(got.subarray(256), ref)).toBeLessThan(2e-2);
  });

  it('linspace spacing (fractional t, linearly interpolated σ) still ends on expectedImage', async () => {
    const { dir, m } = await build({ timestepType: 'float32', scalingFactor: 0.5 });
    const req = { prompt: 'white house', negativePrompt: 'dark', guidanceScale: 2 };
    const got = await generate(dir, m, req.prompt, req.negativePrompt, req.guidanceScale, 7, 'linspace');
    expect(meanAbsoluteError(got, m.expectedImage(req).data)).toBeLessThan(0.6);
  });

  it('external data: weights in model.onnx_data, same answers', async () => {
    const { dir, m } = await build({ externalData: true });
    const plain = await build({});
    const { stat } = await import('node:fs/promises');
    expect((await stat(path.join(dir, 'unet', 'model.onnx_data'))).size).toBeGreaterThan(1000);
    expect((await stat(path.join(dir, 'unet', 'model.onnx'))).size).toBeLessThan(
      (await stat(path.join(plain.dir, 'unet', 'model.onnx'))).size,
    );
    expect(existsSync(path.join(dir, 'text_encoder', 'model.onnx_data'))).toBe(true);
    const feeds = { input_ids: idsTensor(m, ['a red cat']) };
    const a = await runOnnx(path.join(dir, 'text_encoder', 'model.onnx'), feeds);
    const b = await runOnnx(path.join(plain.dir, 'text_encoder', 'model.onnx'), feeds);
    expect(a.last_hidden_state.data).toEqual(b.last_hidden_state.data);
    const u = {
      sample: new ort.Tensor('float32', randn(256, 1), [1, 4, 8, 8]),
      timestep: timestepTensor(m, 321),
      encoder_hidden_states: a.last_hidden_state,
    };
    expect((await runOnnx(path.join(dir, 'unet', 'model.onnx'), u)).out_sample.data).toEqual(
      (await runOnnx(path.join(plain.dir, 'unet', 'model.onnx'), u)).out_sample.data,
    );
  });

  it('int32 timestep, onnx-style model_index, latent_sample encoder, tokenizer.json', async () => {
    const { dir } = await build({ timestepType: 'int32', modelIndexStyle: 'onnx', vaeEncoderOutput: 'latent_sample', tokenizerJson: true });
    const index = JSON.parse(await readFile(path.join(dir, 'model_index.json'), 'utf8'));
    expect(index._class_name).toBe('OnnxStableDiffusionPipeline');
    expect(index.vae_decoder).toEqual(['diffusers', 'OnnxRuntimeModel']);
    expect(existsSync(path.join(dir, 'tokenizer/tokenizer.json'))).toBe(true);
    const enc = await ort.InferenceSession.create(path.join(dir, 'vae_encoder', 'model.onnx'));
    expect(enc.outputNames).toEqual(['latent_sample']);
    await enc.release();
  });
});
