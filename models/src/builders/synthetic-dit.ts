import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelManifestInput } from '@diffmesh/stage-host';
import { GraphBuilder, WeightRng, type GraphKernels } from '../onnx/graph.js';
import {
  addNorm,
  attention,
  conv2d,
  dims,
  floatRange,
  gelu,
  layerNorm,
  type LayerCtx,
  linear,
  mlp,
  modulate,
  shapeConcat,
  shapeOf,
  silu,
  sinusoidalEmbedding,
  timestepEmbedding,
  upsampleNearest2d,
} from '../onnx/layers.js';
import { wordPieceTokenizerJson } from '../tokenizer.js';

/**
 * The synthetic DiT families: random-weight (seeded, deterministic) models whose ONNX
 * graphs have the compute shapes of real text-to-image / text-to-video diffusion
 * transformers, for benchmarks. Their pictures are structured noise; their cost is real.
 *
 * - text encoder: token + position embedding, pre-LN transformer layers, final LayerNorm.
 * - denoiser: a DiT with "adaLN-single" conditioning (one shared timestep projection to
 *   six modulation vectors plus a learned per-block table, as in PixArt-α and Wan):
 *   2×2 patchify per frame (tokens = F·h/2·w/2) → linear embed + 3-D sinusoidal position
 *   embedding → blocks of [modulated self-attention, cross-attention to the text states,
 *   modulated 4× GELU MLP] → modulated final LayerNorm + linear → unpatchify. Batch,
 *   frames, height and width are dynamic (reshapes are computed from Shape ops).
 * - VAE decoder: per-frame 3×3 convolutions and three nearest ×2 upsamplings (×8), tanh;
 *   with temporal compression, latent frame 0 decodes to one frame and every later latent
 *   frame to `temporalFactor` frames (each with its own learned offset).
 */
export interface SyntheticDitConfig {
  name: string;
  version: string;
  description: string;
  seed: number;
  modality: 'text-to-image' | 'text-to-video';
  prediction: 'epsilon' | 'flow';
  sampler: ModelManifestInput['sampler'];
  latentChannels: number;
  temporalFactor: number;
  text: { hidden: number; layers: number; heads: number; maxLength: number };
  dit: { hidden: number; depth: number; heads: number; mlpRatio: number; patch: number; timestepDim: number };
  /** Decoder widths: latent resolution first, then after each of the three ×2 upsamplings. */
  vae: { channels: [number, number, number, number] };
  defaults: { width: number; height: number; numFrames: number; steps: number; guidanceScale: number; fps: number };
  limits: { maxWidth: number; maxHeight: number; maxFrames: number };
}

const SPATIAL_FACTOR = 8;

export const SYNTHETIC_DIT_IMAGE: SyntheticDitConfig = {
  name: 'diffmesh/synthetic-dit-image',
  version: '1.0.0',
  description:
    'Synthetic text-to-image DiT with random weights and realistic compute shapes, for benchmarks ' +
    '(epsilon prediction, DDIM). Width and height must be multiples of 16.',
  seed: 0x5d17_0001,
  modality: 'text-to-image',
  prediction: 'epsilon',
  sampler: {
    type: 'ddim',
    numTrainTimesteps: 1000,
    betaStart: 0.00085,
    betaEnd: 0.012,
    betaSchedule: 'scaled_linear',
  },
  latentChannels: 4,
  temporalFactor: 1,
  text: { hidden: 256, layers: 2, heads: 4, maxLength: 32 },
  dit: { hidden: 384, depth: 6, heads: 6, mlpRatio: 4, patch: 2, timestepDim: 256 },
  vae: { channels: [128, 64, 32, 16] },
  defaults: { width: 256, height: 256, numFrames: 1, steps: 20, guidanceScale: 4.5, fps: 8 },
  limits: { maxWidth: 512, maxHeight: 512, maxFrames: 1 },
};

export const SYNTHETIC_DIT_VIDEO: SyntheticDitConfig = {
  name: 'diffmesh/synthetic-dit-video',
  version: '1.0.0',
  description:
    'Synthetic text-to-video DiT with random weights and realistic compute shapes, for benchmarks ' +
    '(flow matching, Euler, shift 3; 4× temporal compression: frames = 4·(latent frames − 1) + 1). ' +
    'Width and height must be multiples of 16; frame counts of the form 4k + 1.',
  seed: 0x5d17_0002,
  modality: 'text-to-video',
  prediction: 'flow',
  sampler: { type: 'flow_euler', shift: 3 },
  latentChannels: 16,
  temporalFactor: 4,
  text: { hidden: 256, layers: 2, heads: 4, maxLength: 32 },
  dit: { hidden: 384, depth: 4, heads: 6, mlpRatio: 4, patch: 2, timestepDim: 256 },
  vae: { channels: [128, 64, 32, 16] },
  defaults: { width: 256, height: 256, numFrames: 9, steps: 20, guidanceScale: 5, fps: 8 },
  limits: { maxWidth: 512, maxHeight: 512, maxFrames: 33 },
};

/** The `model.json` content for a configuration. */
export function syntheticDitManifest(cfg: SyntheticDitConfig): ModelManifestInput {
  return {
    name: cfg.name,
    version: cfg.version,
    description: cfg.description,
    modalities: [cfg.modality],
    prediction: cfg.prediction,
    sampler: cfg.sampler,
    latent: { channels: cfg.latentChannels, spatialFactor: SPATIAL_FACTOR, temporalFactor: cfg.temporalFactor },
    text: { tokenizer: 'tokenizer.json', maxLength: cfg.text.maxLength, hiddenSize: cfg.text.hidden, padId: 0 },
    defaults: { ...cfg.defaults },
    limits: { ...cfg.limits },
    files: { textEncoder: 'text_encoder.onnx', denoiser: 'denoiser.onnx', vaeDecoder: 'vae_decoder.onnx' },
  };
}

/** Writes one synthetic DiT model (manifest, tokenizer and three ONNX files) into `outDir`. */
export async function buildSyntheticDit(cfg: SyntheticDitConfig, outDir: string): Promise<void> {
  await mkdir(outDir, { recursive: true });
  const words = SYNTHETIC_VOCABULARY;
  await writeFile(path.join(outDir, 'model.json'), `${JSON.stringify(syntheticDitManifest(cfg), null, 2)}\n`);
  await writeFile(path.join(outDir, 'tokenizer.json'), wordPieceTokenizerJson(words));
  await writeFile(path.join(outDir, 'text_encoder.onnx'), buildTextEncoder(cfg, words.length + 2));
  await writeFile(path.join(outDir, 'denoiser.onnx'), buildDenoiser(cfg));
  await writeFile(path.join(outDir, 'vae_decoder.onnx'), buildVaeDecoder(cfg));
}

/** Builds `diffmesh/synthetic-dit-image` into `outDir`. */
export function buildSyntheticDitImage(outDir: string): Promise<void> {
  return buildSyntheticDit(SYNTHETIC_DIT_IMAGE, outDir);
}

/** Builds `diffmesh/synthetic-dit-video` into `outDir`. */
export function buildSyntheticDitVideo(outDir: string): Promise<void> {
  return buildSyntheticDit(SYNTHETIC_DIT_VIDEO, outDir);
}

/** Bump when the synthetic builders' output changes, so cached builds are redone. */
export const SYNTHETIC_DIT_BUILDER_VERSION = '2';

// ---------------------------------------------------------------------------------------
// Text encoder: input_ids [B, L] → last_hidden_state [B, L, Dt]

function buildTextEncoder(cfg: SyntheticDitConfig, vocabSize: number): Uint8Array {
  const { hidden: D, layers, heads, maxLength } = cfg.text;
  const g = new GraphBuilder('synthetic_dit_text_encoder');
  const ctx: LayerCtx = { g, rng: new WeightRng(cfg.seed + 1) };
  const ids = g.input('input_ids', 'int64', ['batch', 'text_length']);
  const tok = g.weight('embeddings.token', ctx.rng.normals(vocabSize * D, 1), [vocabSize, D]);
  const pos = g.weight('embeddings.position', ctx.rng.normals(maxLength * D, 0.5), [maxLength, D]);
  const L = dims(g, shapeOf(g, ids), 1);
  const posL = g.op('Slice', [pos, g.i64([0]), L, g.i64([0])]); // [L, D]
  let x = g.op('Add', [g.op('Gather', [tok, ids], { axis: 0 }), posL]);
  for (let i = 0; i < layers; i += 1) {
    const p = `layers.${i}`;
    const n1 = layerNorm(ctx, x, D, `${p}.norm1`);
    x = g.op('Add', [x, attention(ctx, n1, n1, D, `${p}.attn`, { heads })]);
    x = g.op('Add', [x, mlp(ctx, layerNorm(ctx, x, D, `${p}.norm2`), D, 4 * D, `${p}.mlp`)]);
  }
  const out = layerNorm(ctx, x, D, 'final_norm');
  g.output(out, 'last_hidden_state', 'float32', ['batch', 'text_length', D]);
  return g.build(`${cfg.name} text encoder (random weights)`);
}

// ---------------------------------------------------------------------------------------
// Denoiser: sample [B, C, F, h, w], timestep [B], encoder_hidden_states [B, L, Dt] → out

function buildDenoiser(cfg: SyntheticDitConfig): Uint8Array {
  const what = cfg.prediction === 'flow' ? 'velocity' : 'noise';
  const { depth, hidden: D } = cfg.dit;
  return syntheticDenoiserGraph(cfg).build(`${cfg.name} denoiser: DiT, ${depth} blocks × ${D} wide, predicts ${what} (random weights)`);
}

/**
 * The denoiser's graph (see {@link buildSyntheticDit}), for builders that serialise it
 * themselves. `kernels: 'fused'` writes attention, the residual norms and GELU as onnxruntime's
 * `com.microsoft` kernels (same weights, same function).
 */
export function syntheticDenoiserGraph(cfg: SyntheticDitConfig, kernels: GraphKernels = 'plain'): GraphBuilder {
  const C = cfg.latentChannels;
  const { hidden: D, depth, heads, mlpRatio, patch: P, timestepDim } = cfg.dit;
  const Dt = cfg.text.hidden;
  const PD = C * P * P;
  const g = new GraphBuilder('synthetic_dit_denoiser', { kernels });
  const ctx: LayerCtx = { g, rng: new WeightRng(cfg.seed + 2) };
  const sample = g.input('sample', 'float32', ['batch', C, 'frames', 'height', 'width']);
  const timestep = g.input('timestep', 'float32', ['batch']);
  const ehs = g.input('encoder_hidden_states', 'float32', ['batch', 'text_length', Dt]);

  // Patchify: [B,C,F,h,w] → [B,C,F,h/P,P,w/P,P] → [B,F,h/P,w/P,C,P,P] → [B,N,C·P·P].
  const shp = shapeOf(g, sample);
  const B = dims(g, shp, 0);
  const F = dims(g, shp, 2);
  const Hp = g.op('Div', [dims(g, shp, 3), g.i64([P])]);
  const Wp = g.op('Div', [dims(g, shp, 4), g.i64([P])]);
  const split = g.op('Reshape', [sample, shapeConcat(g, [B, C, F, Hp, P, Wp, P])]);
  const patches = g.op('Reshape', [g.op('Transpose', [split], { perm: [0, 2, 3, 5, 1, 4, 6] }), g.i64([0, -1, PD])]);
  let x = linear(ctx, patches, PD, D, 'x_embedder');
  x = g.op('Add', [x, positionEmbedding3d(g, F, Hp, Wp, D)]);

  // Timestep → embedding [B,D] → shared modulation projection [B,6,D].
  const t1 = linear(ctx, timestepEmbedding(g, timestep, timestepDim), timestepDim, D, 't_embedder.fc1');
  const temb = linear(ctx, silu(g, t1), D, D, 't_embedder.fc2'); // [B,D]
  const t0 = g.op('Reshape', [linear(ctx, silu(g, temb), D, 6 * D, 't_block', { std: 0.1 / Math.sqrt(D) }), g.i64([-1, 6, D])]);

  // Caption projection: [B,L,Dt] → [B,L,D].
  const y = linear(ctx, gelu(g, linear(ctx, ehs, Dt, D, 'y_embedder.fc1')), D, D, 'y_embedder.fc2');

  // Each block's last residual branch is added where the next norm reads the sum (one
  // SkipLayerNormalization with fused kernels).
  let pending: string | undefined;
  for (let i = 0; i < depth; i += 1) {
    const p = `blocks.${i}`;
    const table = g.weight(`${p}.scale_shift_table`, ctx.rng.normals(6 * D, 0.1), [1, 6, D]);
    const mods = g.opN(
      'Split',
      [g.op('Add', [t0, table]), g.i64([1, 1, 1, 1, 1, 1])],
      Array.from({ length: 6 }, () => g.fresh(`${p}.mod`)),
      { axis: 1 },
    );
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp] = mods; // each [B,1,D]
    let n1: string;
    if (pending) [n1, x] = addNorm(ctx, x, pending, D, `${p}.norm1`, { affine: false });
    else n1 = layerNorm(ctx, x, D, `${p}.norm1`, { affine: false });
    const h1 = modulate(g, n1, shiftMsa, scaleMsa);
    let h2: string;
    [h2, x] = addNorm(ctx, x, g.op('Mul', [gateMsa, attention(ctx, h1, h1, D, `${p}.attn`, { heads })]), D, `${p}.norm2`);
    let n3: string;
    const cross = attention(ctx, h2, y, D, `${p}.cross_attn`, { heads, outStd: 0.3 / Math.sqrt(D) });
    [n3, x] = addNorm(ctx, x, cross, D, `${p}.norm3`, { affine: false });
    const h3 = modulate(g, n3, shiftMlp, scaleMlp);
    pending = g.op('Mul', [gateMlp, mlp(ctx, h3, D, mlpRatio * D, `${p}.mlp`)]);
  }

  // Final layer: modulated LayerNorm, linear to patch values.
  const finalTable = g.weight('final.scale_shift_table', ctx.rng.normals(2 * D, 0.1), [1, 2, D]);
  const tScaled = g.op('Mul', [g.op('Unsqueeze', [temb, g.i64([1])]), g.f32(0.1)]); // [B,1,D]
  const [shift, scale] = g.opN(
    'Split',
    [g.op('Add', [finalTable, tScaled]), g.i64([1, 1])],
    [g.fresh('final.shift'), g.fresh('final.scale')],
    { axis: 1 },
  );
  const nf = pending
    ? addNorm(ctx, x, pending, D, 'final.norm', { affine: false })[0]
    : layerNorm(ctx, x, D, 'final.norm', { affine: false });
  const hf = modulate(g, nf, shift, scale);
  const outPatches = linear(ctx, hf, D, PD, 'final.linear', { std: 1 / Math.sqrt(D) });

  // Unpatchify: [B,N,C·P·P] → [B,F,h/P,w/P,C,P,P] → [B,C,F,h/P,P,w/P,P] → [B,C,F,h,w].
  const grid = g.op('Reshape', [outPatches, shapeConcat(g, [B, F, Hp, Wp, C, P, P])]);
  const out = g.op('Reshape', [g.op('Transpose', [grid], { perm: [0, 4, 1, 2, 5, 3, 6] }), shp]);
  g.output(out, 'out', 'float32', ['batch', C, 'frames', 'height', 'width']);
  return g;
}

/**
 * 3-D sinusoidal position embedding `[1, F·Hp·Wp, D]` for token order (frame, row, column):
 * the width is split between the frame, row and column axes, each an even number of sinusoids.
 */
function positionEmbedding3d(g: GraphBuilder, F: string, Hp: string, Wp: string, D: number): string {
  const da = 2 * Math.floor(D / 6);
  const axisDims = [D - 2 * da, da, da];
  const counts = [F, Hp, Wp];
  const full = (d: number): string => shapeConcat(g, [F, Hp, Wp, d]);
  const parts = counts.map((n, axis) => {
    const scalar = g.op('Squeeze', [n, g.i64([0])]);
    const posCol = g.op('Unsqueeze', [floatRange(g, scalar), g.i64([1])]); // [n,1]
    const emb = sinusoidalEmbedding(g, posCol, axisDims[axis]); // [n,d]
    const target = [1, 1, 1, axisDims[axis]];
    target[axis] = -1;
    return g.op('Expand', [g.op('Reshape', [emb, g.i64(target)]), full(axisDims[axis])]);
  });
  const grid = g.op('Concat', parts, { axis: -1 }); // [F,Hp,Wp,D]
  return g.op('Reshape', [grid, g.i64([1, -1, D])]);
}

// ---------------------------------------------------------------------------------------
// VAE decoder: latent [B, C, F, h, w] → sample [B, 3, T, 8h, 8w] in [-1, 1]

function buildVaeDecoder(cfg: SyntheticDitConfig): Uint8Array {
  const C = cfg.latentChannels;
  const tf = cfg.temporalFactor;
  const [c0, c1, c2, c3] = cfg.vae.channels;
  const g = new GraphBuilder('synthetic_dit_vae_decoder');
  const ctx: LayerCtx = { g, rng: new WeightRng(cfg.seed + 3) };
  const latent = g.input('latent', 'float32', ['batch', C, 'frames', 'height', 'width']);
  const shp = shapeOf(g, latent);
  const B = dims(g, shp, 0);
  const h = dims(g, shp, 3);
  const w = dims(g, shp, 4);

  // Frames into the batch: [B,C,F,h,w] → [B,F,C,h,w] → [B·F,C,h,w].
  const perFrame = g.op('Reshape', [g.op('Transpose', [latent], { perm: [0, 2, 1, 3, 4] }), shapeConcat(g, [-1, C, h, w])]);
  let x = silu(g, conv2d(ctx, perFrame, C, c0, 'conv_in'));
  x = silu(g, conv2d(ctx, x, c0, c0, 'mid.conv'));

  if (tf > 1) {
    // Temporal expansion: frame 0 → 1 frame, every later frame → tf frames (learned offsets).
    const frames = g.op('Reshape', [x, shapeConcat(g, [B, -1, c0, h, w])]); // [B,F,c,h,w]
    const first = g.op('Slice', [frames, g.i64([0]), g.i64([1]), g.i64([1])]);
    const rest = g.op('Slice', [frames, g.i64([1]), g.i64([Number.MAX_SAFE_INTEGER]), g.i64([1])]);
    const offsets = g.weight('temporal.offsets', ctx.rng.normals(tf * c0, 0.2), [1, 1, tf, c0, 1, 1]);
    const expanded = g.op('Add', [g.op('Unsqueeze', [rest, g.i64([2])]), offsets]); // [B,F-1,tf,c,h,w]
    const restFlat = g.op('Reshape', [expanded, shapeConcat(g, [B, -1, c0, h, w])]);
    const all = g.op('Concat', [first, restFlat], { axis: 1 }); // [B,T,c,h,w]
    x = g.op('Reshape', [all, shapeConcat(g, [-1, c0, h, w])]);
  }

  const widths = [c0, c1, c2, c3];
  for (let i = 0; i < 3; i += 1) {
    x = silu(g, conv2d(ctx, upsampleNearest2d(g, x, 2), widths[i], widths[i + 1], `up.${i}.conv`));
  }
  const rgb = g.op('Tanh', [conv2d(ctx, x, c3, 3, 'conv_out', { std: 1.5 / Math.sqrt(c3 * 9) })]);

  // Back to [B,3,T,H,W].
  const H = g.op('Mul', [h, g.i64([SPATIAL_FACTOR])]);
  const W = g.op('Mul', [w, g.i64([SPATIAL_FACTOR])]);
  const video = g.op('Reshape', [rgb, shapeConcat(g, [B, -1, 3, H, W])]);
  const out = g.op('Transpose', [video], { perm: [0, 2, 1, 3, 4] });
  g.output(out, 'sample', 'float32', ['batch', 3, 'out_frames', 'out_height', 'out_width']);
  return g.build(`${cfg.name} VAE decoder: ×${SPATIAL_FACTOR} spatial, ×${tf} temporal (random weights)`);
}

// ---------------------------------------------------------------------------------------

/** A few hundred common English words, lower-case and unique, for the WordPiece vocabulary. */
export const SYNTHETIC_VOCABULARY: readonly string[] = `
a an the and or of in on at to from with without by for over under above below behind beside
near far between into through across along around inside outside up down left right top bottom
center middle front back side this that these those is are was were be being been has have had
it its they them their he she his her we our you your my one two three four five six seven eight
nine ten many few some all every each more most less small large big tiny huge tall short long
wide narrow thin thick old new young ancient modern bright dark light heavy soft hard smooth rough
warm cold hot cool wet dry clean dirty empty full quiet loud fast slow calm wild happy sad beautiful
ugly strange simple detailed realistic abstract colorful red orange yellow green blue purple pink
brown black white gray grey gold silver golden sky sun moon star stars cloud clouds rain snow fog
storm wind fire water ice sea ocean lake river beach sand desert mountain mountains hill hills
valley forest tree trees flower flowers grass leaf leaves garden field farm road street city town
village house home building tower bridge castle church room window door wall floor roof table chair
bed lamp book car bus train boat ship plane bicycle person people man woman child children boy girl
baby friend family crowd face eyes hair hand hands dog cat bird birds horse cow fish lion tiger bear
wolf fox rabbit deer elephant monkey dragon robot astronaut knight wizard king queen food bread
fruit apple cake coffee tea cup glass bottle ball box picture photo painting drawing portrait
landscape scene view image video shot camera close closeup style art shadow shadows color
night day morning evening sunset sunrise winter summer spring autumn walking running flying
swimming sitting standing dancing playing jumping reading eating drinking sleeping looking smiling
moving falling rising floating burning glowing shining spinning waves wave space planet galaxy
rocket futuristic cinematic dramatic peaceful magical mysterious cozy vintage neon watercolor oil
sketch cartoon anime pixel digital render high quality sharp focus
`
  .trim()
  .split(/\s+/);
