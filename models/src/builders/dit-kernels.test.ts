// The DiT's fused and 4-bit graphs against its plain graph, on the CPU and on WebGPU over
// SwiftShader (the software Vulkan of Debian's chromium, as in CI): the builder's fused graph,
// the plain graph fused at load by the graph passes, and its weights rewritten to 4 bits.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeModel, graphPassesFor, readModelFile, rewriteModelFile, type GraphRewriteOptions } from '@diffmesh/stage-host';
import { buildPixArtDit, type PixArtDitModel } from './pixart-dit.js';

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
const swiftshader = existsSync(SWIFTSHADER);
if (swiftshader) process.env.VK_ICD_FILENAMES = SWIFTSHADER;

// Small enough for SwiftShader; every block has self- and cross-attention, norms and the MLP.
const SHAPE = { depth: 2, hidden: 128, heads: 4, latentSize: 16, contextLength: 12, contextDim: 64 };
/** float16's precision, relative to the output's largest value: what "equal within fp16 tolerance" means here. */
const FP16_TOLERANCE = 2 ** -10;

let root: string;
let plain: PixArtDitModel;
let fused: PixArtDitModel;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-dit-kernels-'));
  plain = await buildPixArtDit(path.join(root, 'plain'), SHAPE, 'fp32');
  fused = await buildPixArtDit(path.join(root, 'fused'), SHAPE, 'fp32', 'fused');
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function feeds(): Record<string, ort.Tensor> {
  return {
    sample: new ort.Tensor(
      'float32',
      Float32Array.from({ length: 2 * 4 * 16 * 16 }, (_, i) => Math.sin(i)),
      [2, 4, 1, 16, 16],
    ),
    timestep: new ort.Tensor('float32', Float32Array.of(500, 250), [2]),
    encoder_hidden_states: new ort.Tensor(
      'float32',
      Float32Array.from({ length: 2 * 12 * 64 }, (_, i) => Math.cos(i)),
      [2, 12, 64],
    ),
  };
}

async function run(source: string | Uint8Array, provider: string): Promise<Float32Array> {
  const opts = { executionProviders: [provider], graphOptimizationLevel: 'all' as const };
  const s = typeof source === 'string' ? await ort.InferenceSession.create(source, opts) : await ort.InferenceSession.create(source, opts);
  try {
    return (await s.run(feeds())).out.data as Float32Array;
  } finally {
    await s.release();
  }
}

/** Largest difference relative to the reference's largest magnitude, and PSNR over the reference's range. */
function compare(ref: Float32Array, got: Float32Array): { relMax: number; psnr: number } {
  let worst = 0;
  let peak = 0;
  let se = 0;
  for (let i = 0; i < ref.length; i += 1) {
    const d = Math.abs(ref[i] - got[i]);
    worst = Math.max(worst, d);
    peak = Math.max(peak, Math.abs(ref[i]));
    se += d * d;
  }
  return { relMax: worst / peak, psnr: 10 * Math.log10((4 * peak * peak) / (se / ref.length)) };
}

async function rewritten(file: string, options: GraphRewriteOptions, provider: string): Promise<Uint8Array> {
  const r = await rewriteModelFile(file, graphPassesFor(options, provider));
  return r.source as Uint8Array;
}

function opTypes(bytes: Uint8Array): Set<string> {
  return new Set((decodeModel(bytes).graph?.node ?? []).map((n) => n.opType ?? ''));
}

it('the builder’s fused graph gives the plain graph’s output within fp16 tolerance on the CPU', async () => {
  const a = await run(plain.file, 'cpu');
  const b = await run(fused.file, 'cpu');
  expect(compare(a, b).relMax).toBeLessThan(FP16_TOLERANCE);
});

// WebGPU has no fused attention in the pipeline (its MultiHeadAttention is off by up to 0.15
// on SwiftShader; see graph-rewrites.ts): there the norms and GELU are fused.
describe.each([
  ['cpu', true, ['MultiHeadAttention', 'SkipLayerNormalization', 'BiasGelu'], ['Softmax', 'Erf']],
  ['webgpu', swiftshader, ['SkipLayerNormalization', 'BiasGelu'], ['Erf']],
] as const)('the DiT on %s', (provider, available, present, absent) => {
  it.skipIf(!available)('the plain graph fused at load gives the same output, with the provider’s com.microsoft kernels', async () => {
    const bytes = await rewritten(plain.file, { kernels: 'fused' }, provider);
    const ops = opTypes(bytes);
    for (const op of present) expect(ops.has(op)).toBe(true);
    for (const op of absent) expect(ops.has(op)).toBe(false);
    const a = await run(plain.file, provider);
    const b = await run(bytes, provider);
    expect(compare(a, b).relMax).toBeLessThan(FP16_TOLERANCE);
  });

  it.skipIf(!available)('4-bit weights: MatMulNBits in place of the large MatMuls, close to the float32 output', async () => {
    const bytes = await rewritten(plain.file, { kernels: 'fused', weights: 'int4' }, provider);
    const m = decodeModel(bytes);
    const quantized = (m.graph?.node ?? []).filter((n) => n.opType === 'MatMulNBits').length;
    expect(quantized).toBeGreaterThanOrEqual(SHAPE.depth * 10);
    const a = await run(plain.file, provider);
    const b = await run(bytes, provider);
    const { psnr } = compare(a, b);
    // Random Gaussian weights are 4 bits' worst case; real checkpoints lose less.
    expect(psnr).toBeGreaterThan(25);
    expect(psnr).toBeLessThan(90); // the weights really changed
  });
});

describe('graph rewrites at load', () => {
  it('weigh a seventh of float32 with 4-bit weights and leave the file as it was', async () => {
    const before = await readModelFile(plain.file);
    const r = await rewriteModelFile(plain.file, graphPassesFor({ weights: 'int4' }, 'cpu'));
    expect(r.weightBytesAfter / r.weightBytesBefore).toBeLessThan(0.2);
    expect(r.reports.find((x) => x.pass === 'int4-weights')?.refused).toEqual([]);
    const again = await readModelFile(plain.file);
    expect(again.graph?.node?.length).toBe(before.graph?.node?.length);
  });

  it('past the inline limit, load from a temporary copy with external weights, deleted by dispose', async () => {
    const r = await rewriteModelFile(plain.file, graphPassesFor({ kernels: 'fused' }, 'cpu'), 1024);
    expect(typeof r.source).toBe('string');
    const copy = r.source as string;
    expect(existsSync(`${copy}_data`)).toBe(true);
    const a = await run(plain.file, 'cpu');
    const b = await run(copy, 'cpu');
    expect(compare(a, b).relMax).toBeLessThan(FP16_TOLERANCE);
    await r.dispose();
    expect(existsSync(copy)).toBe(false);
  });

  it('are not applied for a provider without the kernels (TensorRT keeps the plain graph)', () => {
    expect(graphPassesFor({ kernels: 'fused', weights: 'int4' }, 'tensorrt')).toEqual([]);
    expect(graphPassesFor({ kernels: 'fused' }, 'cpu').map((p) => p.name)).toContain('fuse-attention');
  });
});
