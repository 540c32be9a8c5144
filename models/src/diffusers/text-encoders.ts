import { GraphBuilder, WeightRng, type ElemType } from '../onnx/graph.js';
import { addClipEncoderLayer } from './clip-encoder-layer.js';
import { SEMANTIC_DIMS } from './vocabulary.js';

/**
 * Small text encoders with the input/output names optimum's ONNX export gives CLIP and T5
 * (`CLIPTextOnnxConfig`, `CLIPTextWithProjectionOnnxConfig`, `T5EncoderOnnxConfig`), whose
 * outputs are exact, cheap functions of the tokens — computed here in TypeScript too, so
 * tests know every output value.
 *
 * CLIP-like encoder (hidden D, N "layers"):
 * - dims 0–3 ("meaning"): the causal running mean of the tokens' meanings — like CLIP's
 *   causal attention, so the EOS position (pooled output) carries the whole prompt;
 * - other dims: token embedding + position embedding (seeded random);
 * - `hidden_states.k` (k = 0…N) = h₀·a_k + b_k with a_k = 1 + k/2 on the meaning dims, so
 *   each layer differs; `last_hidden_state` = hidden_states.N · g + c (the "final layer
 *   norm"; g = 1.25 on the meaning dims);
 * - `pooler_output` = last_hidden_state at the first position holding the largest id (the
 *   EOS, exactly as transformers' CLIPTextTransformer pools), `text_embeds` = pooled · W.
 *
 * T5-like encoder: `last_hidden_state` = token embedding · a (token-local; the meaning dims
 * copy the token's meaning).
 */

/** Meaning-dimension scale of `hidden_states.k`. */
export function clipLayerScale(k: number): number {
  return 1 + k / 2;
}
/** Meaning-dimension scale of `last_hidden_state` relative to `hidden_states.N`. */
export const CLIP_FINAL_SCALE = 1.25;

export type Precision = 'fp32' | 'fp16';

export interface ClipTextEncoderOptions {
  hidden: number;
  /** num_hidden_layers: the graph has `hidden_states.0` … `hidden_states.N`. */
  layers: number;
  /** max_position_embeddings. */
  maxPositions: number;
  /** With projection (CLIPTextModelWithProjection): outputs `text_embeds` [B, P] instead of `pooler_output`. */
  projectionDim?: number;
  /** Dtype of `input_ids` (optimum exports CLIP with int32). */
  idsType: 'int32' | 'int64';
  precision: Precision;
  /** Export `hidden_states.*` outputs (optimum does so for SDXL's encoders). */
  outputHiddenStates: boolean;
  /**
   * A CLIP encoder layer with optimum's layer names before the analytic layers, for
   * text-encoder LoRA files (zero-weighted residual branches: outputs unchanged). Default false.
   */
  loraLayers?: boolean;
  seed: number;
}

/** Weights of the CLIP-like encoder, shared by the graph and the TypeScript reference. */
export class ClipTextWeights {
  readonly tok: Float32Array;
  readonly pos: Float32Array;
  readonly layerA: Float32Array[];
  readonly layerB: Float32Array[];
  readonly lastA: Float32Array;
  readonly lastB: Float32Array;
  readonly proj?: Float32Array;

  constructor(
    readonly opts: ClipTextEncoderOptions,
    readonly vocabSize: number,
    meanings: Float32Array,
  ) {
    const { hidden: D, layers: N, maxPositions: P } = opts;
    if (D < SEMANTIC_DIMS + 1) throw new Error(`hidden size ${D} is too small`);
    const rng = new WeightRng(opts.seed);
    this.tok = rng.normals(vocabSize * D, 0.5);
    for (let v = 0; v < vocabSize; v += 1) {
      for (let k = 0; k < SEMANTIC_DIMS; k += 1) this.tok[v * D + k] = meanings[v * SEMANTIC_DIMS + k];
    }
    this.pos = rng.normals(P * D, 0.1);
    for (let p = 0; p < P; p += 1) for (let k = 0; k < SEMANTIC_DIMS; k += 1) this.pos[p * D + k] = 0;
    const affine = (scale: number): [Float32Array, Float32Array] => {
      const a = rng.normals(D, 0.1).map((x) => 1 + x);
      const b = rng.normals(D, 0.05);
      for (let k = 0; k < SEMANTIC_DIMS; k += 1) {
        a[k] = scale;
        b[k] = 0;
      }
      return [a, b];
    };
    this.layerA = [];
    this.layerB = [];
    for (let k = 0; k <= N; k += 1) {
      if (k === 0) {
        this.layerA.push(new Float32Array(D).fill(1));
        this.layerB.push(new Float32Array(D));
      } else {
        const [a, b] = affine(clipLayerScale(k));
        this.layerA.push(a);
        this.layerB.push(b);
      }
    }
    [this.lastA, this.lastB] = affine(CLIP_FINAL_SCALE);
    if (opts.projectionDim) this.proj = rng.normals(D * opts.projectionDim, 1 / Math.sqrt(D));
  }
}

/** What the CLIP-like encoder outputs for one sequence (each [L, D] row-major, pooled [D]). */
export interface ClipTextOutputs {
  lastHiddenState: Float32Array;
  hiddenStates: Float32Array[];
  pooled: Float32Array;
  textEmbeds?: Float32Array;
}

/** TypeScript reference of the CLIP-like encoder for one sequence of ids. */
export function clipTextForward(w: ClipTextWeights, ids: readonly number[]): ClipTextOutputs {
  const D = w.opts.hidden;
  const L = ids.length;
  if (L > w.opts.maxPositions) throw new Error(`${L} tokens exceed max_position_embeddings ${w.opts.maxPositions}`);
  const h0 = new Float32Array(L * D);
  const sum = new Float64Array(SEMANTIC_DIMS);
  for (let l = 0; l < L; l += 1) {
    const id = ids[l];
    for (let k = 0; k < SEMANTIC_DIMS; k += 1) {
      sum[k] += w.tok[id * D + k];
      h0[l * D + k] = sum[k] / (l + 1);
    }
    for (let d = SEMANTIC_DIMS; d < D; d += 1) h0[l * D + d] = w.tok[id * D + d] + w.pos[l * D + d];
  }
  const affine = (x: Float32Array, a: Float32Array, b: Float32Array) => {
    const y = new Float32Array(x.length);
    for (let i = 0; i < x.length; i += 1) y[i] = x[i] * a[i % D] + b[i % D];
    return y;
  };
  const hiddenStates = w.layerA.map((a, k) => affine(h0, a, w.layerB[k]));
  const lastHiddenState = affine(hiddenStates[hiddenStates.length - 1], w.lastA, w.lastB);
  let at = 0;
  for (let l = 1; l < L; l += 1) if (ids[l] > ids[at]) at = l;
  const pooled = lastHiddenState.slice(at * D, (at + 1) * D);
  let textEmbeds: Float32Array | undefined;
  if (w.proj && w.opts.projectionDim) {
    const Pd = w.opts.projectionDim;
    textEmbeds = new Float32Array(Pd);
    for (let p = 0; p < Pd; p += 1) {
      let acc = 0;
      for (let d = 0; d < D; d += 1) acc += pooled[d] * w.proj[d * Pd + p];
      textEmbeds[p] = acc;
    }
  }
  return { lastHiddenState, hiddenStates, pooled, textEmbeds };
}

function floatType(p: Precision): ElemType {
  return p === 'fp16' ? 'float16' : 'float32';
}

/** Casts a float32 value to the model's output precision. */
export function castOut(g: GraphBuilder, x: string, p: Precision): string {
  return p === 'fp16' ? g.op('Cast', [x], { to: 10 /* FLOAT16 */ }) : x;
}

/** Casts a model input of the given precision to float32. */
export function castIn(g: GraphBuilder, x: string, p: Precision): string {
  return p === 'fp16' ? g.op('Cast', [x], { to: 1 /* FLOAT */ }) : x;
}

/** The CLIP-like encoder as ONNX (`text_encoder/model.onnx`). */
export function buildClipTextEncoderOnnx(w: ClipTextWeights): Uint8Array {
  const { hidden: D, layers: N, maxPositions: P, projectionDim, idsType, precision, outputHiddenStates } = w.opts;
  const g = new GraphBuilder(projectionDim ? 'clip_text_with_projection' : 'clip_text');
  const ids = g.input('input_ids', idsType, ['batch_size', 'sequence_length']);
  const ids64 = idsType === 'int64' ? ids : g.op('Cast', [ids], { to: 7 /* INT64 */ });
  const ids32 = idsType === 'int32' ? ids : g.op('Cast', [ids], { to: 6 /* INT32 */ });
  const tokW = g.weight('embeddings.token_embedding.weight', w.tok, [w.vocabSize, D]);
  const posW = g.weight('embeddings.position_embedding.weight', w.pos, [P, D]);
  const tok = g.op('Gather', [tokW, ids64], { axis: 0 }); // [B, L, D]
  const len = g.op('Slice', [g.op('Shape', [ids]), g.i64([1]), g.i64([2]), g.i64([0])]); // [1]
  const pos = g.op('Slice', [posW, g.i64([0]), len, g.i64([0])]); // [L, D]
  const csum = g.op('CumSum', [tok, g.i64(1, [])]);
  const count = g.op('Range', [
    g.f32(1, []),
    g.op('Add', [g.op('Cast', [g.op('Squeeze', [len, g.i64([0])])], { to: 1 }), g.f32(1, [])]),
    g.f32(1, []),
  ]); // [L] = 1 … L
  const mean = g.op('Div', [csum, g.op('Unsqueeze', [count, g.i64([1])])]);
  const mask = new Float32Array(D);
  mask.fill(1, 0, SEMANTIC_DIMS);
  const semMask = g.f32(Array.from(mask), [D]);
  const restMask = g.f32(
    Array.from(mask, (m) => 1 - m),
    [D],
  );
  const embedded = g.op('Add', [g.op('Mul', [mean, semMask]), g.op('Mul', [g.op('Add', [tok, pos]), restMask])]);
  const h0 = w.opts.loraLayers ? addClipEncoderLayer(g, embedded, D, w.opts.seed) : embedded;
  const hidden: string[] = [h0];
  for (let k = 1; k <= N; k += 1) {
    const a = g.weight(`encoder.layers.${k - 1}.scale`, w.layerA[k], [D]);
    const b = g.weight(`encoder.layers.${k - 1}.shift`, w.layerB[k], [D]);
    hidden.push(g.op('Add', [g.op('Mul', [h0, a]), b]));
  }
  const last = g.op('Add', [
    g.op('Mul', [hidden[N], g.weight('final_layer_norm.weight', w.lastA, [D])]),
    g.weight('final_layer_norm.bias', w.lastB, [D]),
  ]);
  const where = g.op('ArgMax', [ids32], { axis: 1, keepdims: 1 }); // [B, 1]
  const pooled = g.op('GatherND', [last, where], { batch_dims: 1 }); // [B, D]
  const ft = floatType(precision);
  if (projectionDim && w.proj) {
    const te = g.op('MatMul', [pooled, g.weight('text_projection.weight', w.proj, [D, projectionDim])]);
    g.output(castOut(g, te, precision), 'text_embeds', ft, ['batch_size', projectionDim]);
    g.output(castOut(g, last, precision), 'last_hidden_state', ft, ['batch_size', 'sequence_length', D]);
  } else {
    g.output(castOut(g, last, precision), 'last_hidden_state', ft, ['batch_size', 'sequence_length', D]);
    g.output(castOut(g, pooled, precision), 'pooler_output', ft, ['batch_size', D]);
  }
  if (outputHiddenStates) {
    hidden.forEach((h, k) => g.output(castOut(g, h, precision), `hidden_states.${k}`, ft, ['batch_size', 'sequence_length', D]));
  }
  return g.build('diffmesh analytic CLIP text encoder (test model)');
}

export interface T5EncoderOptions {
  hidden: number;
  precision: Precision;
  seed: number;
}

/** Weights of the T5-like encoder. */
export class T5EncoderWeights {
  readonly tok: Float32Array;
  constructor(
    readonly opts: T5EncoderOptions,
    readonly vocabSize: number,
    meanings: Float32Array,
  ) {
    const D = opts.hidden;
    const rng = new WeightRng(opts.seed);
    this.tok = rng.normals(vocabSize * D, 0.3);
    for (let v = 0; v < vocabSize; v += 1) {
      for (let k = 0; k < SEMANTIC_DIMS; k += 1) this.tok[v * D + k] = meanings[v * SEMANTIC_DIMS + k];
    }
  }
}

/** TypeScript reference of the T5-like encoder: [L, D] row-major. */
export function t5Forward(w: T5EncoderWeights, ids: readonly number[]): Float32Array {
  const D = w.opts.hidden;
  const out = new Float32Array(ids.length * D);
  ids.forEach((id, l) => out.set(w.tok.subarray(id * D, (id + 1) * D), l * D));
  return out;
}

/** The T5-like encoder as ONNX (`text_encoder_2/model.onnx`): int64 `input_ids` → `last_hidden_state`. */
export function buildT5EncoderOnnx(w: T5EncoderWeights): Uint8Array {
  const D = w.opts.hidden;
  const g = new GraphBuilder('t5_encoder');
  const ids = g.input('input_ids', 'int64', ['batch_size', 'sequence_length']);
  const tokW = g.weight('shared.weight', w.tok, [w.vocabSize, D]);
  const h = g.op('Gather', [tokW, ids], { axis: 0 });
  g.output(castOut(g, h, w.opts.precision), 'last_hidden_state', floatType(w.opts.precision), ['batch_size', 'sequence_length', D]);
  return g.build('diffmesh analytic T5 encoder (test model)');
}
