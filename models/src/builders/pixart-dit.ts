import { createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { GraphKernels } from '../onnx/graph.js';
import { syntheticDenoiserGraph, SYNTHETIC_DIT_IMAGE, type SyntheticDitConfig } from './synthetic-dit.js';

/** The shape of a PixArt-α-like text-to-image DiT (adaLN-single, self- and cross-attention). */
export interface PixArtDitShape {
  /** DiT blocks (PixArt-α: 28). */
  depth: number;
  /** Width (1152). */
  hidden: number;
  /** Attention heads (16). */
  heads: number;
  /** Latent height and width (64 for 512×512 pixels: 1024 tokens with 2×2 patches). */
  latentSize: number;
  /** Text tokens cross-attended to (T5: 120) and their width (4096). */
  contextLength: number;
  contextDim: number;
}

/**
 * PixArt-α's denoiser: 28 blocks × 1152 wide, 16 heads, 1024 tokens, cross-attention to 120×4096
 * T5 states; about 610 M parameters and 1.4 TFLOP per item per step. The shape the GPU
 * benchmark and `../shared/gpu/torch_dit_reference.py` time.
 */
export const PIXART_ALPHA_SHAPE: Readonly<PixArtDitShape> = Object.freeze({
  depth: 28,
  hidden: 1152,
  heads: 16,
  latentSize: 64,
  contextLength: 120,
  contextDim: 4096,
});

/** What {@link buildPixArtDit} wrote. */
export interface PixArtDitModel {
  /** `denoiser.onnx` (its weights in `denoiser.onnx_data` beside it). */
  file: string;
  shape: PixArtDitShape;
  /** Parameters (weights) of the graph. */
  parameters: number;
  /** Multiply-add FLOPs of one item's step (2 per weight per token, plus attention). */
  flopsPerItem: number;
  precision: 'fp32' | 'fp16';
  kernels: GraphKernels;
  /** The inputs to feed (float32 either way): `sample` [B, 4, 1, s, s], `timestep` [B], `encoder_hidden_states` [B, L, Dc]. */
  inputs: { sample: number[]; encoderHiddenStates: number[] };
}

/**
 * Builds a PixArt-shaped DiT denoiser with the project's own ONNX builder (the synthetic DiT
 * family's graph, random seeded weights) into `outDir`, weights in external data so the full
 * size (2.4 GB of float32) loads. `fp16` computes in float16 with float32 at the edges (the
 * graph's inputs and output), as a float16 export converted with `keep_io_types` does. Its inputs are the synthetic family's: a 5-D
 * `sample` [B, 4, 1, s, s], `timestep` [B], `encoder_hidden_states` [B, L, Dc]. `kernels: 'fused'`
 * writes onnxruntime's `com.microsoft` kernels (MultiHeadAttention, SkipLayerNormalization, Gelu)
 * with the same weights.
 */
export async function buildPixArtDit(
  outDir: string,
  shape: PixArtDitShape = PIXART_ALPHA_SHAPE,
  precision: 'fp32' | 'fp16' = 'fp32',
  kernels: GraphKernels = 'plain',
): Promise<PixArtDitModel> {
  const cfg: SyntheticDitConfig = {
    ...SYNTHETIC_DIT_IMAGE,
    name: 'diffmesh/pixart-shaped-dit',
    seed: 0x9a17_0001,
    latentChannels: 4,
    text: { ...SYNTHETIC_DIT_IMAGE.text, hidden: shape.contextDim, maxLength: shape.contextLength },
    dit: { hidden: shape.hidden, depth: shape.depth, heads: shape.heads, mlpRatio: 4, patch: 2, timestepDim: 256 },
  };
  const g = syntheticDenoiserGraph(cfg, kernels);
  if (precision === 'fp16') g.convertToFloat16();
  const { model, data } = g.buildExternal(
    'denoiser.onnx_data',
    `PixArt-shaped DiT (${shape.depth} blocks × ${shape.hidden}, ${precision}, ${kernels} kernels, random weights) for benchmarks`,
  );
  await mkdir(outDir, { recursive: true });
  const file = path.join(outDir, 'denoiser.onnx');
  await writeFile(file, model);
  await new Promise<void>((resolve, reject) => {
    const out = createWriteStream(path.join(outDir, 'denoiser.onnx_data'));
    out.on('error', reject);
    let i = 0;
    const next = (): void => {
      while (i < data.length) {
        if (!out.write(data[i++])) {
          out.once('drain', next);
          return;
        }
      }
      out.end(resolve);
    };
    next();
  });
  const parameters = g.parameterCount;
  const tokens = (shape.latentSize / 2) ** 2;
  const D = shape.hidden;
  const attention = shape.depth * (4 * tokens * tokens * D + 4 * tokens * shape.contextLength * D);
  // Cross-attention keys/values run over the text tokens, not the image tokens.
  const crossKv = shape.depth * 2 * (shape.contextLength - tokens) * 2 * D * D;
  return {
    file,
    shape,
    precision,
    kernels,
    parameters,
    flopsPerItem: 2 * parameters * tokens + attention + crossKv,
    inputs: { sample: [4, 1, shape.latentSize, shape.latentSize], encoderHiddenStates: [shape.contextLength, shape.contextDim] },
  };
}
