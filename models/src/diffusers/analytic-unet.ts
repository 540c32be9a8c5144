import { GraphBuilder, WeightRng, type ElemType } from '../onnx/graph.js';
import { castIn, castOut, type Precision } from './text-encoders.js';
import { addAttentionBlock } from './unet-attention-block.js';
import { logSigmas, type TrainingScheduleConfig } from './training-schedule.js';
import { SEMANTIC_DIMS } from './vocabulary.js';

/**
 * The analytic UNet of the SD 1.x/2.x and SDXL test layouts, with optimum's names
 * (`UNetOnnxConfig`): `sample`, `timestep`, `encoder_hidden_states` (+ SDXL's `text_embeds`,
 * `time_ids`) → `out_sample`. It knows the clean latent x0 for its conditioning and returns
 * the exact prediction for it:
 *
 *   ε = (x_t − √ᾱ_t·x0) / √(1 − ᾱ_t),   v = √ᾱ_t·ε − √(1 − ᾱ_t)·x0,   sample = x0,
 *
 * with ᾱ_t from the training schedule of scheduler_config.json. At a fractional t the UNet
 * inverts diffusers' `_sigma_to_t` (log σ interpolated between ⌊t⌋ and ⌊t⌋ + 1, ᾱ = 1/(1+σ²)),
 * so Euler/Heun/DPM with Karras sigmas get exact answers too. Every prediction is linear in
 * x0, so classifier-free guidance yields the prediction for x0_u + g·(x0_c − x0_u), and any
 * scheduler that ends at σ = 0 lands on that latent.
 *
 * x0 (scaled latent) = scaling_factor · u, with u[c, i, j] = K_c·tanh(s_c) + amp·P_c(y, x):
 * - s_c = 0.25 · Σ over positions of the meaning dims of encoder_hidden_states (SDXL: of
 *   both encoders' parts), SDXL adds text_embeds · W_te;
 * - K = (0.8, 0.8, 0.8, 0.5); P = (y, x, −y, x·y) on the latent grid, y, x ∈ (−1, 1)
 *   at cell centres ((2i + 1)/h − 1);
 * - amp = 0.3 (SD); SDXL: amp = 0.1 + 0.5·tanh(τ), τ = time_ids · (1, 2, −1, −1, 3, 4)/1024.
 */

export const UNET_COLOUR_SCALE = [0.8, 0.8, 0.8, 0.5] as const;
export const UNET_PATTERN_AMP = 0.3;
/** Gain on the summed meaning dims (keeps colours short of saturation at moderate guidance). */
export const UNET_MEANING_GAIN = 0.25;
export const TIME_IDS_WEIGHTS = [1, 2, -1, -1, 3, 4].map((v) => v / 1024);

export type PredictionType = 'epsilon' | 'v_prediction' | 'sample';
export type TimestepType = 'int64' | 'int32' | 'float32' | 'float16';

export interface AnalyticUnetOptions {
  /** Width of encoder_hidden_states (config cross_attention_dim). */
  crossAttentionDim: number;
  /** Offsets in encoder_hidden_states where a text encoder's meaning dims start (SDXL: [0, D1]). */
  meaningOffsets: number[];
  predictionType: PredictionType;
  timestepType: TimestepType;
  /**
   * `scalar`: rank-0 timestep (current optimum); `vector`: shape ['steps'] (older exports, fed [1]);
   * `batch`: shape ['batch_size'], one timestep per batch item (requests at different steps share a run).
   */
  timestepShape: 'scalar' | 'vector' | 'batch';
  precision: Precision;
  scalingFactor: number;
  schedule: TrainingScheduleConfig;
  /** SDXL: width of text_embeds; adds the `text_embeds` and `time_ids` inputs. */
  textEmbedsDim?: number;
  /** false → a UNet without `encoder_hidden_states` (a broken variant for validation tests). */
  withEncoderHiddenStates?: boolean;
  /** LCM-distilled UNets (config `time_cond_proj_dim`): adds the `timestep_cond` input [B, dim]. */
  timestepCondDim?: number;
  /**
   * Extra work per run, for models whose steps take as long as real ones: a chain of
   * `products` [size × size] matrix products (each followed by tanh, 2·size³ FLOPs) started from
   * the sample, whose mean is added to the output times zero — the prediction, and so the
   * picture, stays the same; only the run takes longer. Default none.
   */
  extraWork?: { size: number; products: number };
  /**
   * Adds a transformer block with optimum's layer names (see `unet-attention-block.ts`) whose
   * base contribution is exactly zero, so LoRA files have layers to update. Default false.
   */
  attentionBlock?: boolean;
  seed: number;
}

/** W_tc [dim, 4] of an LCM UNet (timestep_cond → meaning): what the guidance embedding adds. */
export function timestepCondWeights(opts: AnalyticUnetOptions): Float32Array | undefined {
  if (!opts.timestepCondDim) return undefined;
  return new WeightRng(opts.seed + 7).normals(opts.timestepCondDim * SEMANTIC_DIMS, 1 / Math.sqrt(opts.timestepCondDim));
}

/**
 * The guidance-scale embedding an LCM pipeline feeds as `timestep_cond`, written from
 * diffusers' `LatentConsistencyModelPipeline.get_guidance_scale_embedding(w, embedding_dim)`:
 * w·1000 times exp(−k·ln(10000)/(dim/2 − 1)) for k < dim/2, then [sin ‖ cos], zero-padded
 * to an odd dim. The pipeline calls it with w = guidance_scale − 1.
 */
export function referenceGuidanceEmbedding(w: number, dim: number): Float64Array {
  const half = Math.floor(dim / 2);
  const out = new Float64Array(dim);
  const emb = Math.log(10000) / (half - 1);
  for (let k = 0; k < half; k += 1) {
    const a = w * 1000 * Math.exp(-k * emb);
    out[k] = Math.sin(a);
    out[half + k] = Math.cos(a);
  }
  return out;
}

/** W_te [P, 4] of the SDXL UNet (text_embeds → meaning). */
export function textEmbedsWeights(opts: AnalyticUnetOptions): Float32Array | undefined {
  if (!opts.textEmbedsDim) return undefined;
  return new WeightRng(opts.seed).normals(opts.textEmbedsDim * SEMANTIC_DIMS, 0.3 / Math.sqrt(opts.textEmbedsDim));
}

/** Pattern value P_c at latent cell (i, j) of an h×w latent. */
export function unetPattern(c: number, i: number, j: number, h: number, w: number): number {
  const y = (2 * i + 1) / h - 1;
  const x = (2 * j + 1) / w - 1;
  return c === 0 ? y : c === 1 ? x : c === 2 ? -y : x * y;
}

/** Unscaled clean latent u [4, h, w] for meaning sums s[4] and pattern amplitude amp. */
export function unetCleanLatent(s: ArrayLike<number>, amp: number, h: number, w: number): Float32Array {
  const u = new Float32Array(4 * h * w);
  for (let c = 0; c < 4; c += 1) {
    const colour = UNET_COLOUR_SCALE[c] * Math.tanh(s[c]);
    for (let i = 0; i < h; i += 1) {
      for (let j = 0; j < w; j += 1) u[(c * h + i) * w + j] = colour + amp * unetPattern(c, i, j, h, w);
    }
  }
  return u;
}

/** SDXL pattern amplitude from one row of time_ids. */
export function timeIdsAmp(timeIds: ArrayLike<number>): number {
  let tau = 0;
  for (let i = 0; i < 6; i += 1) tau += timeIds[i] * TIME_IDS_WEIGHTS[i];
  return 0.1 + 0.5 * Math.tanh(tau);
}

/** Meaning sums s[4] of one encoder_hidden_states [L, D] (+ SDXL text_embeds, + LCM timestep_cond). */
export function unetMeaningSums(
  opts: AnalyticUnetOptions,
  ehs: Float32Array,
  textEmbeds?: Float32Array,
  timestepCond?: ArrayLike<number>,
): Float64Array {
  const D = opts.crossAttentionDim;
  const L = ehs.length / D;
  const s = new Float64Array(4);
  for (let l = 0; l < L; l += 1) {
    for (const off of opts.meaningOffsets) {
      for (let c = 0; c < 4; c += 1) s[c] += UNET_MEANING_GAIN * ehs[l * D + off + c];
    }
  }
  const wte = textEmbedsWeights(opts);
  if (wte && textEmbeds && opts.textEmbedsDim) {
    for (let p = 0; p < opts.textEmbedsDim; p += 1) for (let c = 0; c < 4; c += 1) s[c] += textEmbeds[p] * wte[p * 4 + c];
  }
  const wtc = timestepCondWeights(opts);
  if (wtc && timestepCond && opts.timestepCondDim) {
    for (let p = 0; p < opts.timestepCondDim; p += 1) for (let c = 0; c < 4; c += 1) s[c] += timestepCond[p] * wtc[p * 4 + c];
  }
  return s;
}

/**
 * A chain of matrix products that depends on `x` (so it cannot be folded away) and adds
 * exactly zero: mean(tanh(… tanh(M₀·W)·W …)) · 0, with M₀ = W + mean(x)·0. W is a 64×64 block
 * tiled to size × size, so the file stays small while the products are full size.
 */
function extraWork(g: GraphBuilder, x: string, work: { size: number; products: number }, seed: number): string {
  const n = work.size;
  const b = Math.min(64, n);
  const reps = Math.ceil(n / b);
  const block = g.weight('extra_work_block', new WeightRng(seed + 99).normals(b * b, 1 / Math.sqrt(n)), [b, b]);
  const tiled = g.op('Tile', [block, g.i64([reps, reps])]);
  const w = reps * b === n ? tiled : g.op('Slice', [tiled, g.i64([0, 0]), g.i64([n, n])]);
  const fromX = g.op('Mul', [g.op('ReduceMean', [x], { keepdims: 0 }), g.f32(0, [])]);
  let m = g.op('Add', [w, fromX]);
  for (let k = 0; k < work.products; k += 1) m = g.op('Tanh', [g.op('MatMul', [m, w])]);
  return g.op('Mul', [g.op('ReduceMean', [m], { keepdims: 0 }), g.f32(0, [])]);
}

function timestepElem(t: TimestepType): ElemType {
  return t === 'float16' ? 'float16' : t;
}

/**
 * √ᾱ and √(1 − ᾱ) of a timestep input, as [T, 1, 1, 1] float32 values (T = 1 for a scalar):
 * log σ interpolated in the schedule's table, as diffusers' `_sigma_to_t` inverts.
 */
export function timestepToAlphaSigma(g: GraphBuilder, timestep: string, type: TimestepType, table: Float32Array): [string, string] {
  const n = table.length;
  const tf = g.op('Reshape', [type === 'float32' ? timestep : g.op('Cast', [timestep], { to: 1 }), g.i64([-1])]);
  const lo = g.op('Max', [g.op('Min', [g.op('Floor', [tf]), g.f32(n - 2, [])]), g.f32(0, [])]);
  const w = g.op('Min', [g.op('Max', [g.op('Sub', [tf, lo]), g.f32(0, [])]), g.f32(1, [])]);
  const loI = g.op('Cast', [lo], { to: 7 });
  const hiI = g.op('Add', [loI, g.i64(1, [])]);
  const tbl = g.weight('log_sigmas', table, [n]);
  const ls = g.op('Add', [
    g.op('Mul', [g.op('Gather', [tbl, loI], { axis: 0 }), g.op('Sub', [g.f32(1, []), w])]),
    g.op('Mul', [g.op('Gather', [tbl, hiI], { axis: 0 }), w]),
  ]);
  const sigma = g.op('Exp', [ls]);
  const r = g.op('Sqrt', [g.op('Add', [g.op('Mul', [sigma, sigma]), g.f32(1, [])])]);
  const sa = g.op('Div', [g.f32(1, []), r]);
  const s1 = g.op('Div', [sigma, r]);
  const to4 = (v: string) => g.op('Unsqueeze', [v, g.i64([1, 2, 3])]);
  return [to4(sa), to4(s1)];
}

/** `unet/model.onnx`. */
export function buildAnalyticUnetOnnx(opts: AnalyticUnetOptions): Uint8Array {
  const D = opts.crossAttentionDim;
  const g = new GraphBuilder('analytic_unet');
  const ft: ElemType = opts.precision === 'fp16' ? 'float16' : 'float32';
  const sample = g.input('sample', ft, ['batch_size', 4, 'height', 'width']);
  const timestep = g.input(
    'timestep',
    timestepElem(opts.timestepType),
    opts.timestepShape === 'scalar' ? [] : opts.timestepShape === 'batch' ? ['batch_size'] : ['steps'],
  );
  const withEhs = opts.withEncoderHiddenStates ?? true;
  const ehs = withEhs ? g.input('encoder_hidden_states', ft, ['batch_size', 'sequence_length', D]) : undefined;
  const te = opts.textEmbedsDim ? g.input('text_embeds', ft, ['batch_size', opts.textEmbedsDim]) : undefined;
  const tids = opts.textEmbedsDim ? g.input('time_ids', ft, ['batch_size', 6]) : undefined;
  const tc = opts.timestepCondDim ? g.input('timestep_cond', ft, ['batch_size', opts.timestepCondDim]) : undefined;

  const x = castIn(g, sample, opts.precision);
  // Meaning sums s [B, 4].
  const sel = new Float32Array(D * 4);
  for (const off of opts.meaningOffsets) for (let c = 0; c < 4; c += 1) sel[(off + c) * 4 + c] = UNET_MEANING_GAIN;
  let s: string;
  if (ehs) {
    const summed = g.op('ReduceSum', [castIn(g, ehs, opts.precision), g.i64([1])], { keepdims: 0 });
    s = g.op('MatMul', [summed, g.weight('meaning_select', sel, [D, 4])]);
  } else {
    s = g.op('Mul', [g.op('ReduceSum', [x, g.i64([1, 2, 3])], { keepdims: 0 }), g.f32(0)]);
    s = g.op('Unsqueeze', [s, g.i64([1])]);
  }
  const wte = textEmbedsWeights(opts);
  if (te && wte && opts.textEmbedsDim) {
    s = g.op('Add', [s, g.op('MatMul', [castIn(g, te, opts.precision), g.weight('text_embeds_proj', wte, [opts.textEmbedsDim, 4])])]);
  }
  const wtc = timestepCondWeights(opts);
  if (tc && wtc && opts.timestepCondDim) {
    s = g.op('Add', [s, g.op('MatMul', [castIn(g, tc, opts.precision), g.weight('timestep_cond_proj', wtc, [opts.timestepCondDim, 4])])]);
  }
  const colour = g.op('Mul', [g.op('Tanh', [s]), g.f32([...UNET_COLOUR_SCALE], [4])]);
  const colour4 = g.op('Unsqueeze', [colour, g.i64([2, 3])]); // [B, 4, 1, 1]

  // Pattern [1, 4, h, w].
  const shape = g.op('Shape', [x]);
  const axis = (k: number) => {
    const n = g.op('Gather', [shape, g.i64(k, [])], { axis: 0 });
    const nf = g.op('Cast', [n], { to: 1 });
    const r = g.op('Range', [g.f32(0, []), nf, g.f32(1, [])]);
    return g.op('Sub', [g.op('Div', [g.op('Add', [g.op('Mul', [r, g.f32(2)]), g.f32(1)]), nf]), g.f32(1)]);
  };
  const Y = g.op('Unsqueeze', [axis(2), g.i64([0, 1, 3])]); // [1,1,h,1]
  const X = g.op('Unsqueeze', [axis(3), g.i64([0, 1, 2])]); // [1,1,1,w]
  const zeroX = g.op('Mul', [X, g.f32(0)]);
  const zeroY = g.op('Mul', [Y, g.f32(0)]);
  const p0 = g.op('Add', [Y, zeroX]);
  const p1 = g.op('Add', [X, zeroY]);
  const p2 = g.op('Neg', [p0]);
  const p3 = g.op('Mul', [Y, X]);
  const pattern = g.op('Concat', [p0, p1, p2, p3], { axis: 1 });

  let amp: string;
  if (tids) {
    const tau = g.op('MatMul', [castIn(g, tids, opts.precision), g.f32(TIME_IDS_WEIGHTS, [6, 1])]); // [B, 1]
    amp = g.op('Unsqueeze', [g.op('Add', [g.op('Mul', [g.op('Tanh', [tau]), g.f32(0.5)]), g.f32(0.1)]), g.i64([2, 3])]);
  } else {
    amp = g.f32(UNET_PATTERN_AMP, []);
  }
  const u = g.op('Add', [colour4, g.op('Mul', [amp, pattern])]);
  let x0 = g.op('Mul', [u, g.f32(opts.scalingFactor, [])]);
  if (opts.attentionBlock && ehs) x0 = g.op('Add', [x0, addAttentionBlock(g, x, s, castIn(g, ehs, opts.precision), D, opts.seed)]);

  const [sa, s1] = timestepToAlphaSigma(g, timestep, opts.timestepType, logSigmas(opts.schedule));
  const eps = g.op('Div', [g.op('Sub', [x, g.op('Mul', [sa, x0])]), s1]);
  let out: string;
  if (opts.predictionType === 'epsilon') out = eps;
  else if (opts.predictionType === 'v_prediction') out = g.op('Sub', [g.op('Mul', [sa, eps]), g.op('Mul', [s1, x0])]);
  else out = g.op('Add', [x0, g.op('Mul', [eps, g.f32(0)])]);
  if (opts.extraWork && opts.extraWork.products > 0) out = g.op('Add', [out, extraWork(g, x, opts.extraWork, opts.seed)]);
  g.output(castOut(g, out, opts.precision), 'out_sample', ft, ['batch_size', 4, 'height', 'width']);
  return g.build('diffmesh analytic UNet (test model): exact prediction for a known clean latent');
}
