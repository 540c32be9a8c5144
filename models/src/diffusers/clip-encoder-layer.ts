import { GraphBuilder, WeightRng } from '../onnx/graph.js';
import { BlockWriter } from './unet-attention-block.js';

/**
 * One CLIP encoder layer in the test text encoders, named as optimum exports transformers'
 * `CLIPTextModel` (`/text_model/encoder/layers.0/self_attn/q_proj/MatMul`, the weight an
 * `onnx::MatMul_…` initializer [in, out]), so text-encoder LoRA files find its layers; `k_proj`
 * is reached only by its initializer (`text_model.encoder.layers.0.self_attn.k_proj.weight`
 * [out, in] behind a Transpose), the other way exporters leave a layer.
 *
 * The layers that close each residual branch (`self_attn.out_proj`, `mlp.fc2`) have zero
 * weights, so the encoder's outputs are exactly those of the analytic encoder without the layer;
 * a LoRA on those layers changes the embeddings, and every other layer then matters too.
 */

const LAYER = 'text_model.encoder.layers.0';

/** Every linear layer of the encoder layer: module path → [in, out]. */
export function clipEncoderLayerLinears(hidden: number): Record<string, [number, number]> {
  const D = hidden;
  return {
    [`${LAYER}.self_attn.q_proj`]: [D, D],
    [`${LAYER}.self_attn.k_proj`]: [D, D],
    [`${LAYER}.self_attn.v_proj`]: [D, D],
    [`${LAYER}.self_attn.out_proj`]: [D, D],
    [`${LAYER}.mlp.fc1`]: [D, 2 * D],
    [`${LAYER}.mlp.fc2`]: [2 * D, D],
  };
}

const ZERO = new Set([`${LAYER}.self_attn.out_proj`, `${LAYER}.mlp.fc2`]);

/** Adds the layer to a CLIP graph: `h` the hidden states [B, L, D]; returns the layer's output [B, L, D]. */
export function addClipEncoderLayer(g: GraphBuilder, h: string, hidden: number, seed: number): string {
  const w = new BlockWriter(g, new WeightRng(seed + 777), clipEncoderLayerLinears(hidden), ZERO);
  const q = w.linear(`${LAYER}.self_attn.q_proj`, h, true);
  const k = w.transposedLinear(`${LAYER}.self_attn.k_proj`, h);
  const v = w.linear(`${LAYER}.self_attn.v_proj`, h, true);
  const scores = g.op('Mul', [g.op('MatMul', [q, g.op('Transpose', [k], { perm: [0, 2, 1] })]), g.f32(1 / Math.sqrt(hidden), [])]);
  const a = g.op('MatMul', [g.op('Softmax', [scores], { axis: -1 }), v]);
  const h1 = g.op('Add', [h, w.linear(`${LAYER}.self_attn.out_proj`, a, true)]);
  const f = w.linear(`${LAYER}.mlp.fc1`, h1, true);
  const quickGelu = g.op('Mul', [f, g.op('Sigmoid', [g.op('Mul', [f, g.f32(1.702, [])])])]);
  return g.op('Add', [h1, w.linear(`${LAYER}.mlp.fc2`, quickGelu, true)]);
}
