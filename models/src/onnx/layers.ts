import type { GraphBuilder, WeightRng } from './graph.js';

/**
 * Reusable neural-network layers written as ONNX subgraphs (opset 17) on a GraphBuilder.
 * Weights come from a seeded WeightRng, so the same sequence of calls yields the same
 * bytes. Activations are `[B, N, D]` unless stated otherwise; weights of linear layers
 * are stored `[in, out]` and applied with MatMul.
 */
export interface LayerCtx {
  g: GraphBuilder;
  rng: WeightRng;
}

export interface LinearOptions {
  /** Standard deviation of the weights (default 1/√in, which keeps unit variance). */
  std?: number;
  /** Add a bias (default true). */
  bias?: boolean;
  /** Standard deviation of the bias (default 0: zeros). */
  biasStd?: number;
}

/** `x @ W + b` with `W: [inDim, outDim]`, applied to the last axis. */
export function linear(ctx: LayerCtx, x: string, inDim: number, outDim: number, name: string, opts: LinearOptions = {}): string {
  const { g, rng } = ctx;
  const std = opts.std ?? 1 / Math.sqrt(inDim);
  const w = g.weight(`${name}.weight`, rng.normals(inDim * outDim, std), [inDim, outDim]);
  const y = g.op('MatMul', [x, w]);
  if (opts.bias === false) return y;
  const biasData = opts.biasStd ? rng.normals(outDim, opts.biasStd) : new Float32Array(outDim);
  const b = g.weight(`${name}.bias`, biasData, [outDim]);
  return g.op('Add', [y, b]);
}

export interface NormOptions {
  /** Learnable scale and bias (default true); false gives a plain normalisation. */
  affine?: boolean;
  eps?: number;
}

/** LayerNormalization over the last axis. */
export function layerNorm(ctx: LayerCtx, x: string, dim: number, name: string, opts: NormOptions = {}): string {
  const { scale, bias, eps } = normWeights(ctx, dim, name, opts);
  return ctx.g.op('LayerNormalization', [x, scale, ...(bias ? [bias] : [])], { axis: -1, epsilon: { f: eps } });
}

/**
 * A residual sum and the LayerNormalization of it: `[norm(x + y), x + y]`. With fused kernels,
 * one `com.microsoft.SkipLayerNormalization` (its fourth output is the sum).
 */
export function addNorm(ctx: LayerCtx, x: string, y: string, dim: number, name: string, opts: NormOptions = {}): [string, string] {
  const { g } = ctx;
  if (!g.fused) {
    const sum = g.op('Add', [x, y]);
    return [layerNorm(ctx, sum, dim, name, opts), sum];
  }
  const { scale, bias, eps } = normWeights(ctx, dim, name, opts);
  const out = g.fresh('skip_norm');
  const sum = g.fresh('residual');
  g.msOp('SkipLayerNormalization', [x, y, scale, ...(bias ? [bias] : [])], [out, '', '', sum], { epsilon: { f: eps } });
  return [out, sum];
}

function normWeights(ctx: LayerCtx, dim: number, name: string, opts: NormOptions): { scale: string; bias?: string; eps: number } {
  const { g, rng } = ctx;
  const eps = opts.eps ?? 1e-6;
  if (opts.affine === false) return { scale: g.f32(ones(dim), [dim]), eps };
  const s = g.weight(
    `${name}.weight`,
    rng.normals(dim, 0.02).map((v) => 1 + v),
    [dim],
  );
  const b = g.weight(`${name}.bias`, new Float32Array(dim), [dim]);
  return { scale: s, bias: b, eps };
}

/** GELU, exact (erf) form, in the node pattern onnxruntime fuses into one kernel; with fused kernels, `com.microsoft.Gelu`. */
export function gelu(g: GraphBuilder, x: string): string {
  if (g.fused) return g.msOp('Gelu', [x], [g.fresh('gelu')])[0];
  const e = g.op('Erf', [g.op('Div', [x, g.f32(Math.SQRT2)])]);
  return g.op('Mul', [g.op('Mul', [x, g.op('Add', [e, g.f32(1)])]), g.f32(0.5)]);
}

/** SiLU (swish): `x · sigmoid(x)`. */
export function silu(g: GraphBuilder, x: string): string {
  return g.op('Mul', [x, g.op('Sigmoid', [x])]);
}

/** adaLN modulation: `x · (1 + scale) + shift`, with `shift`/`scale` broadcastable to x. */
export function modulate(g: GraphBuilder, x: string, shift: string, scale: string): string {
  return g.op('Add', [g.op('Mul', [x, g.op('Add', [scale, g.f32(1)])]), shift]);
}

/** A two-layer MLP with GELU: `dim → dim·ratio → outDim`. */
export function mlp(ctx: LayerCtx, x: string, dim: number, hidden: number, name: string, outDim = dim): string {
  const h = gelu(ctx.g, linear(ctx, x, dim, hidden, `${name}.fc1`));
  return linear(ctx, h, hidden, outDim, `${name}.fc2`);
}

/**
 * Scaled dot-product attention over already projected tensors: `q: [B, Nq, H·dh]`,
 * `k`/`v: [B, Nk, H·dh]` → `[B, Nq, H·dh]`. Sequence lengths and batch are dynamic. With fused
 * kernels, one `com.microsoft.MultiHeadAttention`.
 */
export function sdpa(g: GraphBuilder, q: string, k: string, v: string, heads: number, headDim: number): string {
  if (g.fused) {
    return g.msOp('MultiHeadAttention', [q, k, v], [g.fresh('mha')], { num_heads: heads, scale: { f: 1 / Math.sqrt(headDim) } })[0];
  }
  const split = g.i64([0, 0, heads, headDim]);
  const qh = g.op('Transpose', [g.op('Reshape', [q, split])], { perm: [0, 2, 1, 3] }); // [B,H,Nq,dh]
  const kt = g.op('Transpose', [g.op('Reshape', [k, split])], { perm: [0, 2, 3, 1] }); // [B,H,dh,Nk]
  const vh = g.op('Transpose', [g.op('Reshape', [v, split])], { perm: [0, 2, 1, 3] }); // [B,H,Nk,dh]
  const qs = g.op('Mul', [qh, g.f32(1 / Math.sqrt(headDim))]);
  const probs = g.op('Softmax', [g.op('MatMul', [qs, kt])], { axis: -1 });
  const o = g.op('MatMul', [probs, vh]); // [B,H,Nq,dh]
  return g.op('Reshape', [g.op('Transpose', [o], { perm: [0, 2, 1, 3] }), g.i64([0, 0, heads * headDim])]);
}

export interface AttentionOptions {
  heads: number;
  /** Width of the key/value source (default: the query width). */
  kvDim?: number;
  /** Standard deviation of the output projection (default 1/√dim). */
  outStd?: number;
}

/**
 * Multi-head attention with q/k/v/out projections: self-attention when `kv === x`,
 * cross-attention otherwise. `x: [B, Nq, dim]`, `kv: [B, Nk, kvDim]` → `[B, Nq, dim]`.
 */
export function attention(ctx: LayerCtx, x: string, kv: string, dim: number, name: string, opts: AttentionOptions): string {
  const { heads } = opts;
  if (dim % heads !== 0) throw new Error(`${name}: width ${dim} is not divisible by ${heads} heads`);
  const kvDim = opts.kvDim ?? dim;
  const q = linear(ctx, x, dim, dim, `${name}.q`);
  const k = linear(ctx, kv, kvDim, dim, `${name}.k`);
  const v = linear(ctx, kv, kvDim, dim, `${name}.v`);
  const o = sdpa(ctx.g, q, k, v, heads, dim / heads);
  return linear(ctx, o, dim, dim, `${name}.out`, { std: opts.outStd ?? 1 / Math.sqrt(dim) });
}

/** `sin`/`cos` frequencies `exp(-ln(maxPeriod) · i / half)` for `i < half`. */
export function sinusoidFrequencies(half: number, maxPeriod = 10000): number[] {
  return Array.from({ length: half }, (_, i) => Math.exp((-Math.log(maxPeriod) * i) / half));
}

/**
 * Sinusoidal embedding of positions or timesteps: `pos: [..., 1]` (float) → `[..., dim]`
 * laid out as `[cos(pos·f), sin(pos·f)]`.
 */
export function sinusoidalEmbedding(g: GraphBuilder, pos: string, dim: number, maxPeriod = 10000): string {
  if (dim % 2 !== 0) throw new Error(`sinusoidal embedding width ${dim} must be even`);
  const args = g.op('Mul', [pos, g.f32(sinusoidFrequencies(dim / 2, maxPeriod))]);
  return g.op('Concat', [g.op('Cos', [args]), g.op('Sin', [args])], { axis: -1 });
}

/** Timestep embedding: `t: [B]` float → sinusoids `[B, dim]`. */
export function timestepEmbedding(g: GraphBuilder, t: string, dim: number, maxPeriod = 10000): string {
  return sinusoidalEmbedding(g, g.op('Unsqueeze', [t, g.i64([1])]), dim, maxPeriod);
}

/** `Shape(x)` as a 1-D int64 tensor. */
export function shapeOf(g: GraphBuilder, x: string): string {
  return g.op('Shape', [x]);
}

/** Dimensions `[start, end)` of a shape tensor, as a 1-D int64 tensor. */
export function dims(g: GraphBuilder, shape: string, start: number, end = start + 1): string {
  return g.op('Slice', [shape, g.i64([start]), g.i64([end]), g.i64([0])]);
}

/** One dimension of a shape tensor as an int64 scalar. */
export function dimScalar(g: GraphBuilder, shape: string, index: number): string {
  return g.op('Gather', [shape, g.i64(index, [])], { axis: 0 });
}

/** Concatenates 1-D int64 pieces (value names or literal numbers) into a shape tensor. */
export function shapeConcat(g: GraphBuilder, parts: Array<string | number | number[]>): string {
  const names = parts.map((p) => (typeof p === 'string' ? p : g.i64(Array.isArray(p) ? p : [p])));
  return g.op('Concat', names, { axis: 0 });
}

/** `[0, 1, …, n-1]` as float32 `[n]`, with `n` an int64 scalar value. */
export function floatRange(g: GraphBuilder, n: string): string {
  const limit = g.op('Cast', [n], { to: 1 /* FLOAT */ });
  return g.op('Range', [g.f32(0, []), limit, g.f32(1, [])]);
}

/** 2-D convolution `[B, cin, H, W] → [B, cout, H, W]` with a k×k kernel and same padding. */
export function conv2d(
  ctx: LayerCtx,
  x: string,
  cin: number,
  cout: number,
  name: string,
  opts: { kernel?: number; std?: number } = {},
): string {
  const { g, rng } = ctx;
  const k = opts.kernel ?? 3;
  const std = opts.std ?? Math.sqrt(2 / (cin * k * k));
  const w = g.weight(`${name}.weight`, rng.normals(cout * cin * k * k, std), [cout, cin, k, k]);
  const b = g.weight(`${name}.bias`, new Float32Array(cout), [cout]);
  const p = Math.floor(k / 2);
  return g.op('Conv', [x, w, b], { kernel_shape: [k, k], pads: [p, p, p, p], strides: [1, 1] });
}

/** Nearest-neighbour ×`factor` upsampling of the last two axes of a 4-D tensor. */
export function upsampleNearest2d(g: GraphBuilder, x: string, factor = 2): string {
  return g.op('Resize', [x, '', g.f32([1, 1, factor, factor])], {
    mode: 'nearest',
    coordinate_transformation_mode: 'asymmetric',
    nearest_mode: 'floor',
  });
}

function ones(n: number): number[] {
  return new Array<number>(n).fill(1);
}
