import { GraphBuilder, type ElemType } from '../onnx/graph.js';
import { castIn, castOut, type Precision } from './text-encoders.js';
import { SEMANTIC_DIMS } from './vocabulary.js';

/**
 * The analytic FLUX transformer, with optimum's names (`FluxTransformerOnnxConfig`, diffusers
 * ≥ 0.31 shapes): `hidden_states` [B, S, 64] (2×2-packed latents), `encoder_hidden_states`
 * [B, T, D_t5], `pooled_projections` [B, D_clip], `timestep` [B] (σ: FluxPipeline passes
 * t / 1000), `txt_ids` [T, 3], `img_ids` [S, 3], `guidance` [B] → `out_hidden_states`
 * [B, S, 64], the exact flow-matching velocity for a known clean latent:
 *
 *   v = (x_t − x0) / σ        (x_t = (1 − σ)·x0 + σ·noise ⇒ v = noise − x0)
 *
 * x0 (packed, in the transformer's scaled space) = scaling_factor · (u − shift_factor), where
 * u is the VAE-space latent. For packed token n with img_ids (0, row, col) and packed channel
 * k = 4·ch + 2·dy + dx, the latent pixel is (i, j) = (2·row + dy, 2·col + dx) and
 *
 *   u = colour_ch + amp · sin(0.45·i + 0.3·ch) · cos(0.35·j − 0.2·ch) + 0.05·tanh(mean(txt_ids))
 *
 * - colour_ch = K_ch·tanh(s_ch) for ch < 4 (K = 0.8, 0.8, 0.8, 0.5), 0.1·sin(ch) otherwise;
 *   s = Σ over T5 positions of the meaning dims + the CLIP pooled meaning dims;
 * - amp = 0.15 + 0.25·tanh(guidance / 3.5) (0.3 without a guidance input).
 *
 * So img_ids and guidance both shape the picture; FLUX's all-zero txt_ids leave it alone.
 */

export const FLUX_LATENT_CHANNELS = 16;
export const FLUX_PACKED_CHANNELS = 64;
const K = [0.8, 0.8, 0.8, 0.5];

export interface AnalyticFluxOptions {
  t5Dim: number;
  pooledDim: number;
  guidanceEmbeds: boolean;
  precision: Precision;
  scalingFactor: number;
  shiftFactor: number;
}

/** Colour of each of the 16 latent channels for meaning sums s[4]. */
export function fluxColours(s: ArrayLike<number>): Float64Array {
  const out = new Float64Array(FLUX_LATENT_CHANNELS);
  for (let ch = 0; ch < FLUX_LATENT_CHANNELS; ch += 1) out[ch] = ch < 4 ? K[ch] * Math.tanh(s[ch]) : 0.1 * Math.sin(ch);
  return out;
}

export function fluxAmp(guidance: number | undefined): number {
  return guidance === undefined ? 0.3 : 0.15 + 0.25 * Math.tanh(guidance / 3.5);
}

/** Meaning sums s[4] from T5 states [T, D_t5] and the CLIP pooled vector [D_clip]. */
export function fluxMeaningSums(opts: AnalyticFluxOptions, t5: Float32Array, pooled: Float32Array): Float64Array {
  const s = new Float64Array(SEMANTIC_DIMS);
  const T = t5.length / opts.t5Dim;
  for (let l = 0; l < T; l += 1) for (let c = 0; c < SEMANTIC_DIMS; c += 1) s[c] += t5[l * opts.t5Dim + c];
  for (let c = 0; c < SEMANTIC_DIMS; c += 1) s[c] += pooled[c];
  return s;
}

/** VAE-space clean latent u [16, h, w] (unpacked) for meaning sums s and a guidance value. */
export function fluxCleanLatent(s: ArrayLike<number>, guidance: number | undefined, h: number, w: number): Float32Array {
  const colours = fluxColours(s);
  const amp = fluxAmp(guidance);
  const u = new Float32Array(FLUX_LATENT_CHANNELS * h * w);
  for (let ch = 0; ch < FLUX_LATENT_CHANNELS; ch += 1) {
    for (let i = 0; i < h; i += 1) {
      for (let j = 0; j < w; j += 1) {
        u[(ch * h + i) * w + j] = colours[ch] + amp * Math.sin(0.45 * i + 0.3 * ch) * Math.cos(0.35 * j - 0.2 * ch);
      }
    }
  }
  return u;
}

/** diffusers' FluxPipeline._pack_latents for one item: [C, h, w] → [(h/2)(w/2), 4C]. */
export function packLatents(z: Float32Array, C: number, h: number, w: number): Float32Array {
  const out = new Float32Array(z.length);
  const hw = w / 2;
  for (let c = 0; c < C; c += 1) {
    for (let i = 0; i < h; i += 1) {
      for (let j = 0; j < w; j += 1) {
        const n = (i >> 1) * hw + (j >> 1);
        const k = c * 4 + (i & 1) * 2 + (j & 1);
        out[n * 4 * C + k] = z[(c * h + i) * w + j];
      }
    }
  }
  return out;
}

/** diffusers' FluxPipeline._unpack_latents for one item: [(h/2)(w/2), 4C] → [C, h, w]. */
export function unpackLatents(packed: Float32Array, C: number, h: number, w: number): Float32Array {
  const out = new Float32Array(packed.length);
  const hw = w / 2;
  for (let c = 0; c < C; c += 1) {
    for (let i = 0; i < h; i += 1) {
      for (let j = 0; j < w; j += 1) {
        out[(c * h + i) * w + j] = packed[((i >> 1) * hw + (j >> 1)) * 4 * C + c * 4 + (i & 1) * 2 + (j & 1)];
      }
    }
  }
  return out;
}

/** diffusers' FluxPipeline._prepare_latent_image_ids(h/2, w/2): [(h/2)(w/2), 3] rows (0, row, col). */
export function latentImageIds(h: number, w: number): Float32Array {
  const out = new Float32Array((h / 2) * (w / 2) * 3);
  for (let r = 0; r < h / 2; r += 1) {
    for (let c = 0; c < w / 2; c += 1) {
      const n = r * (w / 2) + c;
      out[n * 3 + 1] = r;
      out[n * 3 + 2] = c;
    }
  }
  return out;
}

/** `transformer/model.onnx`. */
export function buildAnalyticFluxOnnx(opts: AnalyticFluxOptions): Uint8Array {
  const g = new GraphBuilder('analytic_flux_transformer');
  const ft: ElemType = opts.precision === 'fp16' ? 'float16' : 'float32';
  const P = opts.precision;
  const hs = g.input('hidden_states', ft, ['batch_size', 'packed_height_width', FLUX_PACKED_CHANNELS]);
  const ehs = g.input('encoder_hidden_states', ft, ['batch_size', 'sequence_length', opts.t5Dim]);
  const pooled = g.input('pooled_projections', ft, ['batch_size', opts.pooledDim]);
  // Along the batch axis, as FLUX transformer exports take it (one σ per item).
  const timestep = g.input('timestep', ft, ['batch_size']);
  const txtIds = g.input('txt_ids', ft, ['sequence_length', 3]);
  const imgIds = g.input('img_ids', ft, ['packed_height_width', 3]);
  const guidance = opts.guidanceEmbeds ? g.input('guidance', ft, ['batch_size']) : undefined;

  const x = castIn(g, hs, P);
  const select = (D: number) => {
    const m = new Float32Array(D * SEMANTIC_DIMS);
    for (let c = 0; c < SEMANTIC_DIMS; c += 1) m[c * SEMANTIC_DIMS + c] = 1;
    return m;
  };
  const sT5 = g.op('MatMul', [
    g.op('ReduceSum', [castIn(g, ehs, P), g.i64([1])], { keepdims: 0 }),
    g.weight('t5_meaning_select', select(opts.t5Dim), [opts.t5Dim, SEMANTIC_DIMS]),
  ]);
  const sPool = g.op('MatMul', [
    castIn(g, pooled, P),
    g.weight('pooled_meaning_select', select(opts.pooledDim), [opts.pooledDim, SEMANTIC_DIMS]),
  ]);
  const s = g.op('Add', [sT5, sPool]); // [B, 4]
  const toCh = new Float32Array(SEMANTIC_DIMS * FLUX_LATENT_CHANNELS);
  for (let c = 0; c < SEMANTIC_DIMS; c += 1) toCh[c * FLUX_LATENT_CHANNELS + c] = K[c];
  const bias = Array.from({ length: FLUX_LATENT_CHANNELS }, (_, ch) => (ch < 4 ? 0 : 0.1 * Math.sin(ch)));
  const colour16 = g.op('Add', [
    g.op('MatMul', [g.op('Tanh', [s]), g.weight('colour_map', toCh, [SEMANTIC_DIMS, FLUX_LATENT_CHANNELS])]),
    g.f32(bias, [FLUX_LATENT_CHANNELS]),
  ]);
  const expand = new Float32Array(FLUX_LATENT_CHANNELS * FLUX_PACKED_CHANNELS);
  for (let k = 0; k < FLUX_PACKED_CHANNELS; k += 1) expand[(k >> 2) * FLUX_PACKED_CHANNELS + k] = 1;
  const colour64 = g.op('Unsqueeze', [
    g.op('MatMul', [colour16, g.weight('pack_channels', expand, [FLUX_LATENT_CHANNELS, FLUX_PACKED_CHANNELS])]),
    g.i64([1]),
  ]); // [B, 1, 64]

  const ids = castIn(g, imgIds, P);
  const rows = g.op('Slice', [ids, g.i64([1]), g.i64([2]), g.i64([1])]); // [S, 1]
  const cols = g.op('Slice', [ids, g.i64([2]), g.i64([3]), g.i64([1])]);
  const k64 = Array.from({ length: FLUX_PACKED_CHANNELS }, (_, k) => k);
  const dy = g.f32(
    k64.map((k) => (k >> 1) & 1),
    [1, FLUX_PACKED_CHANNELS],
  );
  const dx = g.f32(
    k64.map((k) => k & 1),
    [1, FLUX_PACKED_CHANNELS],
  );
  const phi = g.f32(
    k64.map((k) => 0.3 * (k >> 2)),
    [1, FLUX_PACKED_CHANNELS],
  );
  const psi = g.f32(
    k64.map((k) => -0.2 * (k >> 2)),
    [1, FLUX_PACKED_CHANNELS],
  );
  const I = g.op('Add', [g.op('Mul', [rows, g.f32(2)]), dy]); // [S, 64]
  const J = g.op('Add', [g.op('Mul', [cols, g.f32(2)]), dx]);
  const pattern = g.op('Mul', [
    g.op('Sin', [g.op('Add', [g.op('Mul', [I, g.f32(0.45)]), phi])]),
    g.op('Cos', [g.op('Add', [g.op('Mul', [J, g.f32(0.35)]), psi])]),
  ]);
  const amp = guidance
    ? g.op('Unsqueeze', [
        g.op('Add', [g.op('Mul', [g.op('Tanh', [g.op('Div', [castIn(g, guidance, P), g.f32(3.5)])]), g.f32(0.25)]), g.f32(0.15)]),
        g.i64([1, 2]),
      ])
    : g.f32(0.3, []);
  const txtTerm = g.op('Mul', [g.op('Tanh', [g.op('ReduceMean', [castIn(g, txtIds, P)], { keepdims: 0 })]), g.f32(0.05, [])]);
  const u = g.op('Add', [g.op('Add', [colour64, g.op('Mul', [amp, g.op('Unsqueeze', [pattern, g.i64([0])])])]), txtTerm]);
  const x0 = g.op('Mul', [g.op('Sub', [u, g.f32(opts.shiftFactor, [])]), g.f32(opts.scalingFactor, [])]);
  const sigma = g.op('Reshape', [castIn(g, timestep, P), g.i64([-1, 1, 1])]);
  const v = g.op('Div', [g.op('Sub', [x, x0]), sigma]);
  g.output(castOut(g, v, P), 'out_hidden_states', ft, ['batch_size', 'packed_height_width', FLUX_PACKED_CHANNELS]);
  return g.build('diffmesh analytic FLUX transformer (test model): exact velocity for a known clean latent');
}
