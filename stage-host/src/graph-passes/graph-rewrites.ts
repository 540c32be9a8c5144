import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runGraphPasses, type GraphPass, type PassReport } from './graph-pass.js';
import { fuseAttention } from './fuse-attention.js';
import { fuseGelu } from './fuse-gelu.js';
import { fuseLayerNorm, fuseSkipLayerNorm } from './fuse-layer-norm.js';
import { decodeModel, encodeModel, moveToExternalData, readModelFile, weightBytes, type ModelProto } from './onnx-model.js';
import { int4Weights } from './quantize-int4.js';

/** How a pool's graphs are rewritten when their sessions are made. */
export interface GraphRewriteOptions {
  /**
   * `fused`: attention, norms and GELU become the `com.microsoft` kernels the provider has
   * (MultiHeadAttention, LayerNormalization/SkipLayerNormalization, Gelu/BiasGelu) where the
   * graph's pattern matches; `plain`: the graph as it is. Default `plain`.
   */
  kernels?: 'plain' | 'fused';
  /** `int4`: large MatMul weights become 4-bit `MatMulNBits` (block 32, symmetric); `as-is`: unchanged. Default `as-is`. */
  weights?: 'as-is' | 'int4';
}

export const KERNEL_CHOICES = ['plain', 'fused'] as const;
export const WEIGHT_CHOICES = ['as-is', 'int4'] as const;

/**
 * The `com.microsoft` kernels each provider runs (onnxruntime's CPU, CUDA and WebGPU contrib
 * kernels). A provider missing here gets the plain graph: e.g. TensorRT, which would hand these
 * nodes back to another provider one by one. WebGPU's MultiHeadAttention (onnxruntime-node
 * 1.30) differs from the CPU's by up to 0.15 on SwiftShader (64 queries, 12 keys, 4 heads of 32),
 * far beyond float16's precision, so WebGPU keeps attention as MatMul/Softmax until that is
 * checked on a hardware adapter.
 */
const PROVIDER_KERNELS: Record<string, ReadonlySet<string>> = {
  cpu: new Set(['fuse-attention', 'fuse-layer-norm', 'fuse-skip-layer-norm', 'fuse-gelu', 'int4-weights']),
  cuda: new Set(['fuse-attention', 'fuse-layer-norm', 'fuse-skip-layer-norm', 'fuse-gelu', 'int4-weights']),
  webgpu: new Set(['fuse-layer-norm', 'fuse-skip-layer-norm', 'fuse-gelu', 'int4-weights']),
};

/**
 * The passes, in the order they run. A new pass (a LoRA branch, another fusion) is one entry
 * here: when it runs (`when`), and the pass itself.
 */
const PASSES: ReadonlyArray<{ when: (o: GraphRewriteOptions) => boolean; pass: GraphPass }> = [
  { when: (o) => o.kernels === 'fused', pass: fuseLayerNorm },
  { when: (o) => o.kernels === 'fused', pass: fuseAttention },
  { when: (o) => o.kernels === 'fused', pass: fuseGelu },
  { when: (o) => o.kernels === 'fused', pass: fuseSkipLayerNorm },
  { when: (o) => o.weights === 'int4', pass: int4Weights() },
];

/** The passes the options ask for that `provider` has kernels for, in order. */
export function graphPassesFor(options: GraphRewriteOptions, provider: string): GraphPass[] {
  const has = PROVIDER_KERNELS[provider];
  return PASSES.filter((p) => p.when(options) && has?.has(p.pass.name)).map((p) => p.pass);
}

/** What a rewrite made: where the session loads from, what each pass did, and the weights' size before and after. */
export interface RewrittenModel {
  /** The model's bytes, or (over 2 GB, protobuf's limit) the path of a temporary copy with its weights beside it. */
  source: Uint8Array | string;
  reports: PassReport[];
  weightBytesBefore: number;
  weightBytesAfter: number;
  /** Deletes the temporary copy, if one was written (after the session is made). */
  dispose(): Promise<void>;
}

/** Under protobuf's 2 GB limit for one message, with room for the graph itself. */
const MAX_INLINE = 1.9e9;

/**
 * Reads `file` (and its external weights), or a model given as bytes (weights inside), runs
 * `passes` over it and returns what a session loads: the model's bytes, or past
 * `inlineLimitBytes` of weights a temporary copy with its weights beside it. The file and its
 * directory are only read.
 */
export async function rewriteModelFile(
  file: string | Uint8Array,
  passes: readonly GraphPass[],
  inlineLimitBytes: number = MAX_INLINE,
): Promise<RewrittenModel> {
  const model = typeof file === 'string' ? await readModelFile(file) : decodeModel(file);
  const before = weightBytes(model);
  const reports = runGraphPasses(model, passes);
  const after = weightBytes(model);
  const base = { reports, weightBytesBefore: before, weightBytesAfter: after };
  if (after < inlineLimitBytes) return { source: encodeModel(model), ...base, dispose: () => Promise.resolve() };
  const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-graph-'));
  const out = path.join(dir, 'model.onnx');
  await writeExternal(model, out);
  return { source: out, ...base, dispose: () => rm(dir, { recursive: true, force: true }) };
}

/** Writes a model with every weight of 1 KiB or more in `<file>_data`, 4096-aligned (as onnx does). */
async function writeExternal(model: ModelProto, file: string): Promise<void> {
  const location = `${path.basename(file)}_data`;
  const chunks = moveToExternalData(model.graph?.initializer ?? [], location, 1024);
  await writeFile(path.join(path.dirname(file), location), chunks);
  await writeFile(file, encodeModel(model));
}
