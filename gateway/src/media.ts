import { Code, DiffmeshError, type ObjectRef } from '@diffmesh/core';
import { type TensorStore } from '@diffmesh/tensor-client';

/** RGB frames of a pixels tensor (`[frames, height, width, 3]` uint8). */
export interface PixelFrames {
  width: number;
  height: number;
  frames: Uint8Array[];
}

/** Fetches a pixels tensor from its owner and splits it into frames. */
export async function fetchFrames(store: TensorStore, ref: ObjectRef): Promise<PixelFrames> {
  const { data } = await store.get(ref);
  const [count, height, width, channels] = ref.shape;
  if (ref.shape.length !== 4 || channels !== 3 || ref.dtype !== 'uint8') {
    throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', `unexpected result tensor ${ref.dtype}[${ref.shape.join(', ')}]`);
  }
  const size = width * height * 3;
  return { width, height, frames: Array.from({ length: count }, (_, f) => data.subarray(f * size, (f + 1) * size)) };
}
