import { invalidParameter } from '@diffmesh/core';
import type { Item } from './model-family.js';

/** Two [L, A] and [L, B] tensors side by side → [L, A + B] (SDXL's hidden states, SD3's pooled projections). */
export function concatLast(a: Item, b: Item): Item {
  const A = a.dims[a.dims.length - 1];
  const B = b.dims[b.dims.length - 1];
  const rows = a.data.length / A;
  if (b.data.length / B !== rows) throw invalidParameter('prompt_embeds_2', `has ${b.data.length / B} rows, prompt_embeds ${rows}`);
  const out = new Float32Array(rows * (A + B));
  for (let r = 0; r < rows; r += 1) {
    out.set(a.data.subarray(r * A, (r + 1) * A), r * (A + B));
    out.set(b.data.subarray(r * B, (r + 1) * B), r * (A + B) + A);
  }
  return { data: out, dims: [...a.dims.slice(0, -1), A + B] };
}

/** Zeros of the shape of `x`. */
export function zerosLike(x: Item): Item {
  return { data: new Float32Array(x.data.length), dims: x.dims };
}
