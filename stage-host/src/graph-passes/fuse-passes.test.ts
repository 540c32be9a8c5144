// Each fusion pass on the node patterns exporters write (torch's SDPA and erf GELU, the
// pre-opset-17 layer norm), run in onnxruntime before and after: the same numbers, fewer nodes;
// and what a pass cannot map is named.
import { describe, expect, it } from 'vitest';
import { beforeAfter, maxDiff, TinyGraph } from './fixtures/tiny-graph.js';
import { fuseAttention } from './fuse-attention.js';
import { fuseGelu } from './fuse-gelu.js';
import { fuseLayerNorm } from './fuse-layer-norm.js';

const B = 2;
const N = 5;
const L = 7;
const H = 3;
const DH = 4;

/** Torch's export of `scaled_dot_product_attention` after `to_q`/`to_k`/`to_v`: q and k each scaled by √s, k transposed twice. */
function torchAttention(g: TinyGraph, scoresAxis = -1): string {
  const q = g.input('q', [B, N, H * DH]);
  const k = g.input('k', [B, L, H * DH]);
  const v = g.input('v', [B, L, H * DH]);
  const split = g.i64([B, -1, H, DH]);
  const sq = Math.sqrt(1 / Math.sqrt(DH));
  const qh = g.op('Mul', [g.op('Transpose', [g.op('Reshape', [q, split])], { perm: [0, 2, 1, 3] }), g.f32([sq])]);
  const kh = g.op('Transpose', [g.op('Reshape', [k, split])], { perm: [0, 2, 1, 3] });
  const kt = g.op('Mul', [g.op('Transpose', [kh], { perm: [0, 1, 3, 2] }), g.f32([sq])]);
  const vh = g.op('Transpose', [g.op('Reshape', [v, split])], { perm: [0, 2, 1, 3] });
  const p = g.op('Softmax', [g.op('MatMul', [qh, kt])], { axis: scoresAxis }, '/attn1/Softmax');
  const o = g.op('Transpose', [g.op('MatMul', [p, vh])], { perm: [0, 2, 1, 3] });
  return g.op('Reshape', [o, g.i64([B, -1, H * DH])]);
}

describe('fuse-attention', () => {
  it('turns torch’s exported attention into one MultiHeadAttention with the same output', async () => {
    const g = new TinyGraph();
    const { before, after, report, ops } = await beforeAfter(g, torchAttention(g), fuseAttention);
    expect(report).toEqual({ pass: 'fuse-attention', rewritten: 1, refused: [] });
    expect(ops).toEqual(['MultiHeadAttention', 'Identity']);
    expect(maxDiff(before, after)).toBeLessThan(1e-5);
  });

  it('names a softmax it cannot map and leaves it', async () => {
    const g = new TinyGraph();
    const { before, after, report, ops } = await beforeAfter(g, torchAttention(g, 2), fuseAttention);
    expect(report.rewritten).toBe(0);
    expect(report.refused).toEqual([{ node: '/attn1/Softmax', reason: 'the softmax is not over the last axis' }]);
    expect(ops).toContain('Softmax');
    expect(maxDiff(before, after)).toBe(0);
  });
});

describe('fuse-layer-norm', () => {
  function spelledOutNorm(g: TinyGraph, axis: number): string {
    const x = g.input('x', [B, N, 6]);
    const mean = g.op('ReduceMean', [x], { axes: [axis] }, '/norm1/ReduceMean');
    const d = g.op('Sub', [x, mean]);
    const v = g.op('ReduceMean', [g.op('Pow', [d, g.f32([2])])], { axes: [axis] });
    const n = g.op('Div', [d, g.op('Sqrt', [g.op('Add', [v, g.f32([1e-5])])])]);
    return g.op('Add', [g.op('Mul', [n, g.f32([1, 2, 0.5, 1, 1.5, 3])]), g.f32([0, 0.1, 0.2, 0.3, 0.4, 0.5])]);
  }

  it('turns the ReduceMean/Sub/Pow/Sqrt/Div norm with its weight and bias into LayerNormalization', async () => {
    const g = new TinyGraph();
    const { before, after, report, ops } = await beforeAfter(g, spelledOutNorm(g, -1), fuseLayerNorm);
    expect(report.rewritten).toBe(1);
    expect(ops).toEqual(['LayerNormalization', 'Identity']);
    expect(maxDiff(before, after)).toBeLessThan(1e-5);
  });

  it('names a norm over another axis', async () => {
    const g = new TinyGraph();
    const { report, ops } = await beforeAfter(g, spelledOutNorm(g, 1), fuseLayerNorm);
    expect(report.refused).toEqual([{ node: '/norm1/ReduceMean', reason: 'the mean is not over the last axis' }]);
    expect(ops).toContain('ReduceMean');
  });
});

describe('fuse-gelu', () => {
  it.each([
    ['x·(1+erf(x/√2))·0.5 after a MatMul’s bias', 'div', 'BiasGelu'],
    ['0.5x·(1+erf(x·1/√2))', 'mul', 'Gelu'],
  ] as const)('turns %s into %s', async (_, form, op) => {
    const g = new TinyGraph();
    const input = g.input('x', [B, N, 6]);
    const x =
      form === 'div'
        ? g.op('Add', [
            g.op('MatMul', [
              input,
              g.f32(
                Array.from({ length: 36 }, (_, i) => Math.cos(i)),
                [6, 6],
              ),
            ]),
            g.f32([0, 1, 2, 3, 4, 5]),
          ])
        : input;
    let y: string;
    if (form === 'div') {
      const e = g.op('Erf', [g.op('Div', [x, g.f32([Math.SQRT2])])]);
      y = g.op('Mul', [g.op('Mul', [x, g.op('Add', [e, g.f32([1])])]), g.f32([0.5])]);
    } else {
      const e = g.op('Erf', [g.op('Mul', [x, g.f32([Math.SQRT1_2])])]);
      y = g.op('Mul', [g.op('Mul', [x, g.f32([0.5])]), g.op('Add', [g.f32([1]), e])]);
    }
    const { before, after, report, ops } = await beforeAfter(g, y, fuseGelu);
    expect(report.rewritten).toBe(1);
    expect(ops).toContain(op);
    expect(ops).not.toContain('Erf');
    expect(maxDiff(before, after)).toBeLessThan(1e-5);
  });
});
