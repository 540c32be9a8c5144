import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addLoraBranches,
  encodeSafetensors,
  findGraphLinears,
  loadLoraAdapter,
  loraFeeds,
  mergeLora,
  type AdapterUse,
  type LoraSlot,
  type MappedAdapter,
  type ModelGraphs,
  type ModelProto,
} from '@diffmesh/adapters';
import { toUint8Image } from './analytic-vae.js';
import { meanAbsoluteError } from './layout-files.js';
import { testLoraTensors, writeTestLora, type TestLoraOptions } from './lora-files.js';
import { buildSdDir, type SdTestModel } from './sd-layout.js';
import { eulerSchedule, randn, runOnnx } from './test-helpers.js';

const { onnx } = onnxProto;

/**
 * The LoRA pass on a test SD directory whose UNet has a transformer block with optimum's
 * layer names: pictures made with the LoRA branches (adapters fed per batch item) against
 * pictures of the same UNet with the LoRA merged into its weights, both run by onnxruntime.
 */

let root: string;
let dir: string;
let m: SdTestModel;
let base: ModelProto;
let graphs: ModelGraphs;
let branched: ort.InferenceSession;
let slots: LoraSlot[];
const D = 32;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-lora-'));
  dir = path.join(root, 'sd');
  m = await buildSdDir(dir, { attentionBlock: true, hiddenSize: D });
  base = onnx.ModelProto.decode(await readFile(path.join(dir, 'unet', 'model.onnx')));
  const linears = findGraphLinears(base);
  graphs = { family: 'sd', linears: { denoiser: linears } };
  const rewritten = addLoraBranches(base, [...linears.byModule.values()]);
  slots = rewritten.slots;
  branched = await ort.InferenceSession.create(onnx.ModelProto.encode(rewritten.model).finish());
});
afterAll(async () => {
  await branched?.release();
  if (root) await rm(root, { recursive: true, force: true });
});

async function adapter(name: string, o: Omit<TestLoraOptions, 'crossAttentionDim'>): Promise<MappedAdapter> {
  const file = path.join(root, `${name}.safetensors`);
  const bytes = await writeTestLora(file, { crossAttentionDim: D, ...o });
  return loadLoraAdapter(bytes, file, graphs);
}

interface Request {
  prompt: string;
  uses: AdapterUse[];
  seed: number;
}

/** An Euler loop with CFG for several requests in one batch (each request: [negative, prompt] rows); returns their pictures. */
async function pictures(session: ort.InferenceSession, requests: Request[], withLora: boolean): Promise<Uint8Array[]> {
  const h = m.options.sampleSize;
  const n = 4 * h * h;
  const L = m.options.maxLength;
  const R = requests.length;
  const ehs = new Float32Array(2 * R * L * D);
  requests.forEach((r, i) => {
    ehs.set(m.promptEmbeds(''), 2 * i * L * D);
    ehs.set(m.promptEmbeds(r.prompt), (2 * i + 1) * L * D);
  });
  const rows = requests.flatMap((r) => [r.uses, r.uses]);
  const extra: Record<string, ort.Tensor> = {};
  if (withLora) for (const f of loraFeeds(slots, 'denoiser', rows)) extra[f.name] = new ort.Tensor(f.type, f.data, f.dims);
  const steps = 6;
  const sched = eulerSchedule(m.schedulerConfig, steps, false);
  const xs = requests.map((r) => randn(n, r.seed).map((v) => v * sched[0].sigma));
  for (let i = 0; i < steps; i += 1) {
    const { sigma, t } = sched[i];
    const sample = new Float32Array(2 * R * n);
    xs.forEach((x, r) => {
      const xin = x.map((v) => v / Math.sqrt(sigma * sigma + 1));
      sample.set(xin, 2 * r * n);
      sample.set(xin, (2 * r + 1) * n);
    });
    const out = await session.run({
      sample: new ort.Tensor('float32', sample, [2 * R, 4, h, h]),
      timestep: new ort.Tensor('int64', BigInt64Array.from([BigInt(t)]), []),
      encoder_hidden_states: new ort.Tensor('float32', ehs, [2 * R, L, D]),
      ...extra,
    });
    const eps = out.out_sample.data as Float32Array;
    xs.forEach((x, r) => {
      const u = eps.subarray(2 * r * n, (2 * r + 1) * n);
      const c = eps.subarray((2 * r + 1) * n, (2 * r + 2) * n);
      const next = sched[i + 1].sigma;
      for (let k = 0; k < n; k += 1) x[k] += (u[k] + 2 * (c[k] - u[k])) * (next - sigma);
    });
  }
  const out: Uint8Array[] = [];
  for (const x of xs) {
    const dec = await runOnnx(path.join(dir, 'vae_decoder', 'model.onnx'), {
      latent_sample: new ort.Tensor(
        'float32',
        x.map((v) => v / m.options.scalingFactor),
        [1, 4, h, h],
      ),
    });
    out.push(toUint8Image(dec.sample.data as Float32Array, 8 * h, 8 * h));
  }
  return out;
}

async function session(model: ModelProto): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(onnx.ModelProto.encode(model).finish());
}

async function mergedPicture(r: Request): Promise<Uint8Array> {
  const s = await session(mergeLora(base, 'denoiser', r.uses));
  try {
    return (await pictures(s, [{ ...r, uses: [] }], false))[0];
  } finally {
    await s.release();
  }
}

async function basePicture(r: Request): Promise<Uint8Array> {
  const s = await session(base);
  try {
    return (await pictures(s, [r], false))[0];
  } finally {
    await s.release();
  }
}

describe('LoRA branches in the UNet graph', () => {
  it('every linear layer of the block is found: by node name, by initializer name behind a Transpose, and as a Gemm', () => {
    const found = graphs.linears.denoiser!;
    const toK = found.byModule.get('down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_k');
    expect(toK?.layout).toBe('out_in');
    expect(toK?.node.startsWith('/')).toBe(false);
    expect(found.byModule.get('time_embedding.linear_1')?.node).toBe('/time_embedding/linear_1/Gemm');
    expect(found.byModule.get('down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k')).toMatchObject({
      inDim: D,
      outDim: 8,
      layout: 'in_out',
    });
    expect(found.byModule.size).toBe(13);
  });

  for (const [label, o] of [
    ['diffusers/PEFT (float16, lora_alpha in the metadata)', { format: 'peft', dtype: 'F16', rank: 4, alpha: 2, seed: 5 }],
    ['kohya (bfloat16, .alpha keys)', { format: 'kohya', dtype: 'BF16', rank: 2, alpha: 1, seed: 6 }],
  ] as const) {
    it(`a ${label} file gives the merged-weights picture within 1/255, and scale 0 gives the base picture exactly`, async () => {
      const lora = await adapter(label.split(' ')[0].replace('/', '-'), o);
      const r: Request = { prompt: 'a red cat', uses: [{ adapter: lora, scale: 0.8 }], seed: 11 };
      const [withBranch] = await pictures(branched, [r], true);
      const merged = await mergedPicture(r);
      const plain = await basePicture(r);
      expect(meanAbsoluteError(withBranch, merged)).toBeLessThanOrEqual(1);
      // The adapter visibly changes the picture.
      expect(meanAbsoluteError(withBranch, plain)).toBeGreaterThan(4);
      const [atZero] = await pictures(branched, [{ ...r, uses: [{ adapter: lora, scale: 0 }] }], true);
      expect(Buffer.from(atZero).equals(Buffer.from(plain))).toBe(true);
      const [without] = await pictures(branched, [{ ...r, uses: [] }], true);
      expect(Buffer.from(without).equals(Buffer.from(plain))).toBe(true);
    });
  }

  it('requests with different adapters, two at once, or none share one run and each gets its own picture', async () => {
    const a = await adapter('a', { format: 'peft', seed: 21 });
    const b = await adapter('b', { format: 'kohya', rank: 8, alpha: 4, seed: 22 });
    const requests: Request[] = [
      { prompt: 'a red cat', uses: [{ adapter: a, scale: 1 }], seed: 1 },
      { prompt: 'a blue dog', uses: [{ adapter: b, scale: 0.5 }], seed: 2 },
      { prompt: 'a green car', uses: [], seed: 3 },
      {
        prompt: 'a red cat',
        uses: [
          { adapter: a, scale: 0.7 },
          { adapter: b, scale: 0.4 },
        ],
        seed: 4,
      },
    ];
    const together = await pictures(branched, requests, true);
    for (let i = 0; i < requests.length; i += 1) {
      const [solo] = await pictures(branched, [requests[i]], true);
      expect(meanAbsoluteError(together[i], solo), `request ${i}`).toBeLessThanOrEqual(0.05);
    }
    expect(meanAbsoluteError(together[3], await mergedPicture(requests[3]))).toBeLessThanOrEqual(1);
    expect(meanAbsoluteError(together[0], together[3])).toBeGreaterThan(1);
  });

  it("reads kohya's SDXL-style block names (input_blocks_1_1_…) as the same layers as diffusers' names", async () => {
    const { tensors } = testLoraTensors({ format: 'kohya', crossAttentionDim: D, rank: 2, alpha: 1, seed: 8 });
    const sgm: typeof tensors = {};
    for (const [k, v] of Object.entries(tensors)) {
      sgm[k.replace('lora_unet_down_blocks_0_attentions_0_', 'lora_unet_input_blocks_1_1_')] = v;
    }
    expect(Object.keys(sgm).filter((k) => k.includes('input_blocks_1_1_transformer_blocks_0_attn2_to_k'))).toHaveLength(3);
    const a = loadLoraAdapter(encodeSafetensors(tensors), 'diffusers-names.safetensors', graphs);
    const b = loadLoraAdapter(encodeSafetensors(sgm), 'sgm-names.safetensors', graphs);
    expect([...b.components.denoiser!.keys()].sort()).toEqual([...a.components.denoiser!.keys()].sort());
    const [pa] = await pictures(branched, [{ prompt: 'a red cat', uses: [{ adapter: a, scale: 1 }], seed: 3 }], true);
    const [pb] = await pictures(branched, [{ prompt: 'a red cat', uses: [{ adapter: b, scale: 1 }], seed: 3 }], true);
    expect(Buffer.from(pa).equals(Buffer.from(pb))).toBe(true);
  });

  it('refuses, before applying anything, a file with a layer the UNet lacks, one of other widths, and one for another family', async () => {
    const { tensors, metadata } = testLoraTensors({ format: 'peft', crossAttentionDim: D });
    tensors['unet.up_blocks.3.attentions.2.transformer_blocks.0.attn1.to_q.lora_A.weight'] = {
      dtype: 'F32',
      shape: [4, 8],
      data: new Float32Array(32),
    };
    tensors['unet.up_blocks.3.attentions.2.transformer_blocks.0.attn1.to_q.lora_B.weight'] = {
      dtype: 'F32',
      shape: [8, 4],
      data: new Float32Array(32),
    };
    expect(() => loadLoraAdapter(encodeSafetensors(tensors, metadata), 'extra.safetensors', graphs)).toThrow(
      /key unet\.up_blocks\.3\.attentions\.2\.transformer_blocks\.0\.attn1\.to_q\.lora_A\.weight: no linear layer/,
    );
    const wide = testLoraTensors({ format: 'kohya', crossAttentionDim: 768 });
    expect(() => loadLoraAdapter(encodeSafetensors(wide.tensors), 'wide.safetensors', graphs)).toThrow(
      /key lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k\.lora_down\.weight: updates 768 → 8, layer .* is 32 → 8/,
    );
    const flux = testLoraTensors({ format: 'kohya', crossAttentionDim: D, metadata: { ss_base_model_version: 'flux1' } });
    expect(() => loadLoraAdapter(encodeSafetensors(flux.tensors, flux.metadata), 'flux.safetensors', graphs)).toThrow(
      /is a LoRA for flux, the model is sd/,
    );
  });
});
