import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPixArtDit } from './pixart-dit.js';

const { onnx } = onnxProto;

// The benchmark DiT at a small size: the same graph, float32 and float16 (float32 at the edges).
const SHAPE = { depth: 2, hidden: 128, heads: 4, latentSize: 16, contextLength: 12, contextDim: 64 };

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-pixart-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function feeds(): Record<string, ort.Tensor> {
  return {
    sample: new ort.Tensor(
      'float32',
      Float32Array.from({ length: 2 * 4 * 16 * 16 }, (_, i) => Math.sin(i)),
      [2, 4, 1, 16, 16],
    ),
    timestep: new ort.Tensor('float32', Float32Array.of(500, 250), [2]),
    encoder_hidden_states: new ort.Tensor(
      'float32',
      Float32Array.from({ length: 2 * 12 * 64 }, (_, i) => Math.cos(i)),
      [2, 12, 64],
    ),
  };
}

describe('the PixArt-shaped DiT', () => {
  it('float16 computes in half precision with float32 at the edges, close to the float32 graph', async () => {
    const f32 = await buildPixArtDit(path.join(root, 'fp32'), SHAPE, 'fp32');
    const f16 = await buildPixArtDit(path.join(root, 'fp16'), SHAPE, 'fp16');
    expect(f16.parameters).toBe(f32.parameters);
    // Weights in the external file at half the bytes; the graph's inputs and output stay float32.
    const m = onnx.ModelProto.decode(await readFile(f16.file));
    const types = new Set((m.graph?.initializer ?? []).map((t) => t.dataType));
    expect(types.has(onnx.TensorProto.DataType.FLOAT)).toBe(false);
    expect(types.has(onnx.TensorProto.DataType.FLOAT16)).toBe(true);
    const a = await ort.InferenceSession.create(f32.file);
    const b = await ort.InferenceSession.create(f16.file);
    expect(b.inputMetadata.map((i) => (i.isTensor ? i.type : ''))).toEqual(['float32', 'float32', 'float32']);
    const x = (await a.run(feeds())).out.data as Float32Array;
    const y = (await b.run(feeds())).out.data as Float32Array;
    let worst = 0;
    let scale = 0;
    for (let i = 0; i < x.length; i += 1) {
      worst = Math.max(worst, Math.abs(x[i] - y[i]));
      scale = Math.max(scale, Math.abs(x[i]));
    }
    expect(scale).toBeGreaterThan(0.1);
    expect(worst / scale).toBeLessThan(0.01);
    expect(worst).toBeGreaterThan(0); // it really ran in half precision
  });
});
