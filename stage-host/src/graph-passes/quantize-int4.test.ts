import ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';
import { describe, expect, it } from 'vitest';
import { runGraphPasses } from './graph-pass.js';
import { decodeModel, encodeModel, floatTensor, makeNode, DataType } from './onnx-model.js';
import { dequantizeInt4, int4Weights, quantizeInt4 } from './quantize-int4.js';

const { onnx } = onnxProto;

/** y = x · W (+ a MatMul on a weight behind a Transpose), K = 80 (not a multiple of 32), N = 24. */
function model(K: number, N: number, w: Float32Array): Uint8Array {
  const info = (name: string, dims: number[]) =>
    new onnx.ValueInfoProto({
      name,
      type: new onnx.TypeProto({
        tensorType: new onnx.TypeProto.Tensor({
          elemType: DataType.FLOAT,
          shape: new onnx.TensorShapeProto({ dim: dims.map((d) => new onnx.TensorShapeProto.Dimension({ dimValue: d })) }),
        }),
      }),
    });
  const wt = new Float32Array(K * N);
  for (let k = 0; k < K; k += 1) for (let n = 0; n < N; n += 1) wt[n * K + k] = w[k * N + n];
  const graph = new onnx.GraphProto({
    name: 'g',
    node: [
      makeNode('MatMul', ['x', 'proj.weight'], ['y'], '/proj/MatMul'),
      makeNode('Transpose', ['to_q.weight'], ['wq'], '/to_q/Transpose', [new onnx.AttributeProto({ name: 'perm', type: 7, ints: [1, 0] })]),
      makeNode('MatMul', ['x', 'wq'], ['z'], '/to_q/MatMul'),
    ],
    initializer: [floatTensor('proj.weight', DataType.FLOAT, [K, N], w), floatTensor('to_q.weight', DataType.FLOAT, [N, K], wt)],
    input: [info('x', [3, K])],
    output: [info('y', [3, N]), info('z', [3, N])],
  });
  return encodeModel(new onnx.ModelProto({ irVersion: 8, opsetImport: [{ domain: '', version: 17 }], graph }));
}

describe('4-bit weights', () => {
  const K = 80;
  const N = 24;
  const w = Float32Array.from({ length: K * N }, (_, i) => Math.sin(i * 1.7) * (1 + (i % 7)));
  const x = Float32Array.from({ length: 3 * K }, (_, i) => Math.cos(i * 0.3));

  it('packs as onnxruntime’s MatMulNBits reads it: its product equals x times the dequantized weight', async () => {
    const m = decodeModel(model(K, N, w));
    const [report] = runGraphPasses(m, [int4Weights({ minElements: 1 })]);
    expect(report.rewritten).toBe(2);
    expect((m.graph?.node ?? []).map((n) => n.opType)).toEqual(['MatMulNBits', 'MatMulNBits']);
    const s = await ort.InferenceSession.create(encodeModel(m));
    const out = await s.run({ x: new ort.Tensor('float32', x, [3, K]) });
    const dq = dequantizeInt4(quantizeInt4(w, K, N));
    for (const name of ['y', 'z']) {
      const got = out[name].data as Float32Array;
      for (let r = 0; r < 3; r += 1) {
        for (let n = 0; n < N; n += 1) {
          let want = 0;
          for (let k = 0; k < K; k += 1) want += x[r * K + k] * dq[k * N + n];
          expect(Math.abs(got[r * N + n] - want)).toBeLessThan(1e-3 * (1 + Math.abs(want)));
        }
      }
    }
  });

  it('quantizes symmetrically per block of 32: every value within half a step of its weight (a step where +8 clips to 7)', () => {
    const q = quantizeInt4(w, K, N);
    const dq = dequantizeInt4(q);
    const blocks = Math.ceil(K / 32);
    for (let n = 0; n < N; n += 1) {
      for (let b = 0; b < blocks; b += 1) {
        const scale = q.scales[n * blocks + b];
        for (let k = b * 32; k < Math.min(K, b * 32 + 32); k += 1) {
          expect(Math.abs(dq[k * N + n] - w[k * N + n])).toBeLessThanOrEqual(
            Math.abs(scale) * 0.5 + 1e-6 + (Math.abs(w[k * N + n] / scale) > 7.5 ? Math.abs(scale) : 0),
          );
        }
      }
    }
  });

  it('leaves small weights and computed operands alone', () => {
    const m = decodeModel(model(K, N, w));
    const [report] = runGraphPasses(m, [int4Weights()]);
    expect(report.rewritten).toBe(0);
    expect((m.graph?.node ?? []).filter((n) => n.opType === 'MatMul')).toHaveLength(2);
  });
});
