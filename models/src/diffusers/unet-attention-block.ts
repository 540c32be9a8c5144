import { GraphBuilder, WeightRng } from '../onnx/graph.js';

/**
 * A transformer block in the test UNets, named as torch.onnx / optimum export diffusers'
 * `Transformer2DModel` (`/down_blocks.0/attentions.0/transformer_blocks.0/attn1/to_q/MatMul`, the
 * weight an `onnx::MatMul_…` initializer [in, out]), so LoRA files find its layers. Three
 * layers are reached the other ways exporters leave: `attn1.to_k` only by its initializer
 * (`….attn1.to_k.weight` [out, in] behind a Transpose, node named `MatMul_…`), `time_embedding.linear_1`
 * as a Gemm with transB = 1 on the meaning sums [B, 4].
 *
 * The block's contribution to the clean latent is proj_out(h − h_in): the layers that close
 * each residual branch (`attn1.to_out.0`, `attn2.to_out.0`, `ff.net.2`) have zero weights, so
 * the base UNet's prediction, and picture, are exactly those of the analytic UNet; a LoRA on
 * those layers changes the picture, and every other layer then matters too.
 */

/** Inner width of the block. */
export const BLOCK_DIM = 8;
const PREFIX = 'down_blocks.0.attentions.0';
const TB = `${PREFIX}.transformer_blocks.0`;
/** How much of the block's output reaches the clean latent. */
const BLOCK_GAIN = 0.5;

/** Every linear layer of the block: module path → [in, out]. */
export function attentionBlockLinears(crossAttentionDim: number): Record<string, [number, number]> {
  const C = BLOCK_DIM;
  return {
    [`${PREFIX}.proj_in`]: [4, C],
    'time_embedding.linear_1': [4, C],
    [`${TB}.attn1.to_q`]: [C, C],
    [`${TB}.attn1.to_k`]: [C, C],
    [`${TB}.attn1.to_v`]: [C, C],
    [`${TB}.attn1.to_out.0`]: [C, C],
    [`${TB}.attn2.to_q`]: [C, C],
    [`${TB}.attn2.to_k`]: [crossAttentionDim, C],
    [`${TB}.attn2.to_v`]: [crossAttentionDim, C],
    [`${TB}.attn2.to_out.0`]: [C, C],
    [`${TB}.ff.net.0.proj`]: [C, 2 * C],
    [`${TB}.ff.net.2`]: [2 * C, C],
    [`${PREFIX}.proj_out`]: [C, 4],
  };
}

/** Layers whose base weights are zero (each closes a residual branch). */
const ZERO = new Set([`${TB}.attn1.to_out.0`, `${TB}.attn2.to_out.0`, `${TB}.ff.net.2`]);

/** Writes linear layers as the exporters leave them; layers in `zero` get zero weights. */
export class BlockWriter {
  private exportIds = 900;
  constructor(
    private readonly g: GraphBuilder,
    private readonly rng: WeightRng,
    private readonly dims: Record<string, [number, number]>,
    private readonly zero: ReadonlySet<string> = ZERO,
  ) {}

  private values(module: string): Float32Array {
    const [i, o] = this.dims[module];
    return this.zero.has(module) ? new Float32Array(i * o) : this.rng.normals(i * o, 1 / Math.sqrt(i));
  }

  /** y = x·W (+ b) as optimum leaves it: node `/a/b/MatMul`, weight `onnx::MatMul_N` [in, out]. */
  linear(module: string, x: string, bias = false): string {
    const [i, o] = this.dims[module];
    const path = `/${module.replace(/\.(?=[a-z_])/g, '/')}`;
    this.exportIds += 1;
    const w = this.g.weight(`onnx::MatMul_${this.exportIds}`, this.values(module), [i, o]);
    const y = this.g.named(`${path}/MatMul`, 'MatMul', [x, w]);
    if (!bias) return y;
    return this.g.named(`${path}/Add`, 'Add', [this.g.weight(`${module}.bias`, new Float32Array(o), [o]), y]);
  }

  /** A layer found only by its initializer's name: torch's [out, in] weight behind a Transpose. */
  transposedLinear(module: string, x: string): string {
    const [i, o] = this.dims[module];
    const wt = this.g.weight(`${module}.weight`, transpose(this.values(module), i, o), [o, i]);
    return this.g.op('MatMul', [x, this.g.op('Transpose', [wt], { perm: [1, 0] })]);
  }

  /** A Gemm with transB = 1 on a [B, in] input (weight `<module>.weight` [out, in], bias `<module>.bias`). */
  gemm(module: string, x: string): string {
    const [i, o] = this.dims[module];
    const wt = this.g.weight(`${module}.weight`, transpose(this.values(module), i, o), [o, i]);
    const b = this.g.weight(`${module}.bias`, new Float32Array(o), [o]);
    return this.g.named(`/${module.replace(/\.(?=[a-z_])/g, '/')}/Gemm`, 'Gemm', [x, wt, b], { transB: 1 });
  }
}

/** [i, o] row-major → [o, i]. */
function transpose(w: Float32Array, i: number, o: number): Float32Array {
  const t = new Float32Array(i * o);
  for (let a = 0; a < i; a += 1) for (let b = 0; b < o; b += 1) t[b * i + a] = w[a * o + b];
  return t;
}

function attention(g: GraphBuilder, q: string, k: string, v: string): string {
  const scores = g.op('Mul', [g.op('MatMul', [q, g.op('Transpose', [k], { perm: [0, 2, 1] })]), g.f32(1 / Math.sqrt(BLOCK_DIM), [])]);
  return g.op('MatMul', [g.op('Softmax', [scores], { axis: -1 }), v]);
}

/**
 * Adds the block to a UNet graph: `x` the sample [B, 4, h, w], `s` the meaning sums [B, 4],
 * `ehs` encoder_hidden_states [B, L, D]. Returns the block's contribution [B, 4, h, w], to add
 * to the clean latent.
 */
export function addAttentionBlock(g: GraphBuilder, x: string, s: string, ehs: string, crossAttentionDim: number, seed: number): string {
  const w = new BlockWriter(g, new WeightRng(seed + 4242), attentionBlockLinears(crossAttentionDim));
  const shape = g.op('Shape', [x]);
  const tokens = g.op(
    'Transpose',
    [g.op('Reshape', [x, g.op('Concat', [g.op('Slice', [shape, g.i64([0]), g.i64([2])]), g.i64([-1])], { axis: 0 })])],
    {
      perm: [0, 2, 1],
    },
  ); // [B, hw, 4]
  const temb = g.op('Unsqueeze', [w.gemm('time_embedding.linear_1', s), g.i64([1])]);
  const hIn = g.op('Add', [w.linear(`${PREFIX}.proj_in`, tokens, true), temb]);
  const a1 = attention(
    g,
    w.linear(`${TB}.attn1.to_q`, hIn),
    w.transposedLinear(`${TB}.attn1.to_k`, hIn),
    w.linear(`${TB}.attn1.to_v`, hIn),
  );
  const h1 = g.op('Add', [hIn, w.linear(`${TB}.attn1.to_out.0`, a1, true)]);
  const a2 = attention(g, w.linear(`${TB}.attn2.to_q`, h1), w.linear(`${TB}.attn2.to_k`, ehs), w.linear(`${TB}.attn2.to_v`, ehs));
  const h2 = g.op('Add', [h1, w.linear(`${TB}.attn2.to_out.0`, a2, true)]);
  const f = w.linear(`${TB}.ff.net.0.proj`, h2, true);
  const gelu = g.op('Mul', [f, g.op('Sigmoid', [g.op('Mul', [f, g.f32(1.702, [])])])]);
  const h3 = g.op('Add', [h2, w.linear(`${TB}.ff.net.2`, gelu, true)]);
  const out = w.linear(`${PREFIX}.proj_out`, g.op('Sub', [h3, hIn])); // [B, hw, 4]
  const back = g.op('Reshape', [g.op('Transpose', [out], { perm: [0, 2, 1] }), shape]);
  return g.op('Mul', [back, g.f32(BLOCK_GAIN, [])]);
}
