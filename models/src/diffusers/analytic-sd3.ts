import { GraphBuilder, WeightRng, type ElemType } from '../onnx/graph.js';
import { FLUX_LATENT_CHANNELS } from './analytic-flux.js';
import { castIn, castOut, type Precision } from './text-encoders.js';
import { SEMANTIC_DIMS } from './vocabulary.js';

/**
 * The analytic SD3 transformer, with optimum's names (`SD3TransformerOnnxConfig`):
 * `hidden_states` [B, 16, h, w], `encoder_hidden_states` [B, T, J], `pooled_projections`
 * [B, P], `timestep` [B] (t = σ·1000, as StableDiffusion3Pipeline passes it) →
 * `out_hidden_states` [B, 16, h, w] = (x_t − x0)/σ, the exact flow velocity.
 *
 * x0 = scaling_factor·(u − shift_factor), u[ch, i, j] = colour_ch + 0.3·sin(0.45·i + 0.3·ch)·
 * cos(0.35·j − 0.2·ch) (FLUX's clean latent without guidance), with the meaning sums
 * s = 0.25·Σ over all rows of dims 0–3 of encoder_hidden_states (CLIP-L rows and T5 rows) +
 * pooled_projections·W (W seeded, [P, 4]).
 */

export const SD3_MEANING_GAIN = 0.25;

export interface AnalyticSd3Options {
  jointDim: number;
  pooledDim: number;
  precision: Precision;
  scalingFactor: number;
  shiftFactor: number;
  seed: number;
}

/** W [P, 4] applied to pooled_projections. */
export function sd3PooledWeights(opts: AnalyticSd3Options): Float32Array {
  return new WeightRng(opts.seed).normals(opts.pooledDim * SEMANTIC_DIMS, 0.3 / Math.sqrt(opts.pooledDim));
}

/** Meaning sums s[4] of one encoder_hidden_states [T, J] and pooled [P]. */
export function sd3MeaningSums(opts: AnalyticSd3Options, ehs: Float32Array, pooled: Float32Array): Float64Array {
  const s = new Float64Array(SEMANTIC_DIMS);
  const T = ehs.length / opts.jointDim;
  for (let r = 0; r < T; r += 1) for (let c = 0; c < SEMANTIC_DIMS; c += 1) s[c] += SD3_MEANING_GAIN * ehs[r * opts.jointDim + c];
  const w = sd3PooledWeights(opts);
  for (let p = 0; p < opts.pooledDim; p += 1) for (let c = 0; c < SEMANTIC_DIMS; c += 1) s[c] += pooled[p] * w[p * SEMANTIC_DIMS + c];
  return s;
}

/** `transformer/model.onnx` of the SD3 layout. */
export function buildAnalyticSd3Onnx(opts: AnalyticSd3Options): Uint8Array {
  const C = FLUX_LATENT_CHANNELS;
  const g = new GraphBuilder('analytic_sd3_transformer');
  const ft: ElemType = opts.precision === 'fp16' ? 'float16' : 'float32';
  const P = opts.precision;
  const hs = g.input('hidden_states', ft, ['batch_size', C, 'height', 'width']);
  const ehs = g.input('encoder_hidden_states', ft, ['batch_size', 'sequence_length', opts.jointDim]);
  const pooled = g.input('pooled_projections', ft, ['batch_size', opts.pooledDim]);
  const timestep = g.input('timestep', ft, ['step']);
  const x = castIn(g, hs, P);

  const sel = new Float32Array(opts.jointDim * SEMANTIC_DIMS);
  for (let c = 0; c < SEMANTIC_DIMS; c += 1) sel[c * SEMANTIC_DIMS + c] = SD3_MEANING_GAIN;
  const s = g.op('Add', [
    g.op('MatMul', [
      g.op('ReduceSum', [castIn(g, ehs, P), g.i64([1])], { keepdims: 0 }),
      g.weight('meaning_select', sel, [opts.jointDim, SEMANTIC_DIMS]),
    ]),
    g.op('MatMul', [castIn(g, pooled, P), g.weight('pooled_proj', sd3PooledWeights(opts), [opts.pooledDim, SEMANTIC_DIMS])]),
  ]); // [B, 4]
  const K = [0.8, 0.8, 0.8, 0.5];
  const toCh = new Float32Array(SEMANTIC_DIMS * C);
  for (let c = 0; c < SEMANTIC_DIMS; c += 1) toCh[c * C + c] = K[c];
  const bias = Array.from({ length: C }, (_, ch) => (ch < 4 ? 0 : 0.1 * Math.sin(ch)));
  const colour = g.op('Add', [g.op('MatMul', [g.op('Tanh', [s]), g.weight('colour_map', toCh, [SEMANTIC_DIMS, C])]), g.f32(bias, [C])]);
  const colour4 = g.op('Unsqueeze', [colour, g.i64([2, 3])]); // [B, 16, 1, 1]

  const shape = g.op('Shape', [x]);
  const range = (k: number) =>
    g.op('Range', [g.f32(0, []), g.op('Cast', [g.op('Gather', [shape, g.i64(k, [])], { axis: 0 })], { to: 1 }), g.f32(1, [])]);
  const chs = Array.from({ length: C }, (_, ch) => ch);
  const I = g.op('Unsqueeze', [range(2), g.i64([0, 1, 3])]); // [1, 1, h, 1]
  const J = g.op('Unsqueeze', [range(3), g.i64([0, 1, 2])]); // [1, 1, 1, w]
  const rows = g.op('Sin', [
    g.op('Add', [
      g.op('Mul', [I, g.f32(0.45)]),
      g.f32(
        chs.map((ch) => 0.3 * ch),
        [1, C, 1, 1],
      ),
    ]),
  ]);
  const cols = g.op('Cos', [
    g.op('Add', [
      g.op('Mul', [J, g.f32(0.35)]),
      g.f32(
        chs.map((ch) => -0.2 * ch),
        [1, C, 1, 1],
      ),
    ]),
  ]);
  const u = g.op('Add', [colour4, g.op('Mul', [g.op('Mul', [rows, cols]), g.f32(0.3)])]);
  const x0 = g.op('Mul', [g.op('Sub', [u, g.f32(opts.shiftFactor, [])]), g.f32(opts.scalingFactor, [])]);
  const sigma = g.op('Div', [g.op('Reshape', [castIn(g, timestep, P), g.i64([-1, 1, 1, 1])]), g.f32(1000, [])]);
  const v = g.op('Div', [g.op('Sub', [x, x0]), sigma]);
  g.output(castOut(g, v, P), 'out_hidden_states', ft, ['batch_size', C, 'height', 'width']);
  return g.build('diffmesh analytic SD3 transformer (test model): exact velocity for a known clean latent');
}
