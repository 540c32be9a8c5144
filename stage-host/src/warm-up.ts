import { feedTensor } from './ort-tensors.js';
import type { ModelSession, ort } from './onnx-sessions.js';

/** Names graphs give their batch axis. */
const BATCH_NAMES = /^(batch|batch_size|batch_dim|n|b|N|B)$/;

/**
 * Runs `session` once on zeros, each input sized from its declared shape: fixed sizes as they
 * are, symbolic ones from `dims` (batch axes default to `dims.batch`, else 1). On a GPU the
 * first run of a shape compiles its shaders; doing it at start keeps that out of the first
 * request. Returns undefined when it ran, or why it could not size an input.
 */
export async function runOnZeros(session: ModelSession, dims: Record<string, number>): Promise<string | undefined> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const input of session.inputMetadata) {
    if (!input.isTensor || !input.type) return `input "${input.name}" is not a tensor`;
    const shape: number[] = [];
    for (const d of input.shape ?? []) {
      const size = typeof d === 'number' ? d : (dims[d] ?? (BATCH_NAMES.test(d) ? (dims.batch ?? 1) : undefined));
      if (size === undefined) return `input "${input.name}" has a dimension "${d}" diffmesh cannot size at start`;
      shape.push(size);
    }
    const n = shape.reduce((a, b) => a * b, 1);
    feeds[input.name] = feedTensor(input.type, new Float32Array(n), shape);
  }
  await session.run(feeds, { transfer: true });
  return undefined;
}
