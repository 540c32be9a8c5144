import type { GraphPass, PassRefusal } from './graph-pass.js';
import {
  attrFloat,
  attrInt,
  attrInts,
  DataType,
  elemTypeOf,
  floatAttr,
  floatTensor,
  importMsDomain,
  intAttr,
  makeNode,
  MS_DOMAIN,
  tensorValues,
  type GraphIndex,
  type NodeProto,
} from './onnx-model.js';

/**
 * The layer norm that exporters before opset 17 spell out — `ReduceMean`, `Sub`, `Pow` 2 (or
 * `Mul` by itself), `ReduceMean`, `Add` ε, `Sqrt`, `Div`, then an optional `Mul` by a weight and
 * `Add` of a bias, all over the last axis — becomes one `LayerNormalization` (axis −1, the
 * same ε). A norm without a weight needs its width: from the weight, else the graph's stated
 * shape of its input; without either it is refused.
 */
export const fuseLayerNorm: GraphPass = {
  name: 'fuse-layer-norm',
  run(g) {
    const refused: PassRefusal[] = [];
    let rewritten = 0;
    for (const mean of g.nodes.filter((n) => n.opType === 'ReduceMean')) {
      const m = matchLayerNorm(g, mean);
      if (m === undefined) continue;
      if (typeof m === 'string') {
        refused.push({ node: mean.name ?? '', reason: m });
        continue;
      }
      const out = m.last.output?.[0] ?? '';
      const inputs = [m.x, m.scale];
      if (m.bias) inputs.push(m.bias);
      g.replace(m.nodes, [
        makeNode('LayerNormalization', inputs, [out], `${m.last.name ?? 'norm'}/LayerNormalization`, [
          intAttr('axis', -1),
          floatAttr('epsilon', m.eps),
        ]),
      ]);
      rewritten += 1;
    }
    return { rewritten, refused };
  },
};

interface NormMatch {
  x: string;
  scale: string;
  bias?: string;
  eps: number;
  nodes: NodeProto[];
  last: NodeProto;
}

/** undefined: this ReduceMean does not start a norm (it is the second one, or something else). */
function matchLayerNorm(g: GraphIndex, mean: NodeProto): NormMatch | string | undefined {
  const x = mean.input?.[0] ?? '';
  const sub = g.consumersOf(mean.output?.[0] ?? '').find((c) => c.opType === 'Sub' && c.input?.[0] === x);
  if (!sub) return undefined;
  if (!lastAxis(g, mean)) return 'the mean is not over the last axis';
  const d = sub.output?.[0] ?? '';
  const users = g.consumersOf(d);
  const sq = users.find(
    (u) => (u.opType === 'Pow' && g.scalar(u.input?.[1] ?? '') === 2) || (u.opType === 'Mul' && u.input?.[0] === d && u.input?.[1] === d),
  );
  const div = users.find((u) => u.opType === 'Div' && u.input?.[0] === d);
  if (!sq || !div || users.length !== 2) return 'x − mean is not squared and divided';
  const mean2 = g.soleConsumer(sq.output?.[0] ?? '');
  if (!mean2 || mean2.opType !== 'ReduceMean' || !lastAxis(g, mean2)) return 'the variance is not a mean over the last axis';
  const addEps = g.soleConsumer(mean2.output?.[0] ?? '');
  const eps = addEps?.opType === 'Add' ? g.scalar(addEps.input?.[1] ?? '') : undefined;
  if (!addEps || eps === undefined) return 'the variance has no ε added';
  const sqrt = g.soleConsumer(addEps.output?.[0] ?? '');
  if (!sqrt || sqrt.opType !== 'Sqrt' || g.producer(div.input?.[1] ?? '') !== sqrt) return 'the deviation is not divided by √(var + ε)';
  if (g.consumersOf(mean.output?.[0] ?? '').length !== 1 || g.isGraphOutput(d)) return 'a part of the norm is read elsewhere';
  const nodes = [mean, sub, sq, mean2, addEps, sqrt, div];
  let last = div;
  let scale: string | undefined;
  let bias: string | undefined;
  const mul = g.soleConsumer(div.output?.[0] ?? '');
  const weight = mul?.opType === 'Mul' ? constOperand(g, mul, div.output?.[0] ?? '') : undefined;
  if (mul && weight) {
    scale = weight;
    nodes.push(mul);
    last = mul;
    const add = g.soleConsumer(mul.output?.[0] ?? '');
    const b = add?.opType === 'Add' ? constOperand(g, add, mul.output?.[0] ?? '') : undefined;
    if (add && b) {
      bias = b;
      nodes.push(add);
      last = add;
    }
  }
  if (!scale) {
    const width = widthOf(g, x);
    if (!width) return 'a norm without a weight over a value of unknown width';
    const type = elemTypeOf(g, x) === DataType.FLOAT16 ? DataType.FLOAT16 : DataType.FLOAT;
    scale = `${mean.name ?? 'norm'}/ones`;
    g.addInitializer(floatTensor(scale, type, [width], new Float32Array(width).fill(1)));
  }
  return { x, scale, ...(bias ? { bias } : {}), eps, nodes, last };
}

/** The other input of a binary node when it is a 1-D constant. */
function constOperand(g: GraphIndex, n: NodeProto, from: string): string | undefined {
  const other = (n.input ?? []).find((i) => i !== from);
  const t = other ? g.constant(other) : undefined;
  return t && (t.dims ?? []).length === 1 ? other : undefined;
}

function lastAxis(g: GraphIndex, n: NodeProto): boolean {
  const axes = attrInts(n, 'axes') ?? (n.input?.[1] ? tensorValuesOf(g, n.input[1]) : undefined);
  return axes !== undefined && axes.length === 1 && axes[0] === -1 && attrInt(n, 'keepdims', 1) === 1;
}

function tensorValuesOf(g: GraphIndex, name: string): number[] | undefined {
  const t = g.constant(name);
  return t ? tensorValues(t) : undefined;
}

function widthOf(g: GraphIndex, value: string): number | undefined {
  const gr = g.model.graph;
  for (const v of [...(gr?.input ?? []), ...(gr?.valueInfo ?? [])]) {
    if (v.name !== value) continue;
    const dims = v.type?.tensorType?.shape?.dim ?? [];
    const last = dims[dims.length - 1];
    const n = last?.dimValue !== undefined && last.dimValue !== null ? Number(last.dimValue) : 0;
    return n > 0 ? n : undefined;
  }
  return undefined;
}

/**
 * A residual `Add(a, b)` read by a `LayerNormalization` (axis −1) becomes one
 * `com.microsoft.SkipLayerNormalization(a, b, weight, bias)`, whose fourth output is the sum
 * itself, so the residual stream reads it from there. Additions of a constant (a bias) or a
 * broadcast operand are left as they are: only sums of two computed values are fused.
 */
export const fuseSkipLayerNorm: GraphPass = {
  name: 'fuse-skip-layer-norm',
  run(g) {
    const refused: PassRefusal[] = [];
    let rewritten = 0;
    for (const ln of g.nodes.filter((n) => n.opType === 'LayerNormalization')) {
      const add = g.producer(ln.input?.[0] ?? '');
      if (!add || add.opType !== 'Add') continue;
      const [a, b] = add.input ?? [];
      if (!a || !b || g.constant(a) || g.constant(b)) continue;
      if (attrInt(ln, 'axis', -1) !== -1 || (ln.output ?? []).filter(Boolean).length !== 1) {
        refused.push({ node: ln.name ?? '', reason: 'only a norm over the last axis with one output is fused' });
        continue;
      }
      if (!sameShapeOperands(g, a, b)) continue;
      const sum = add.output?.[0] ?? '';
      const keepSum = g.consumersOf(sum).length > 1 || g.isGraphOutput(sum);
      const inputs = [a, b, ln.input?.[1] ?? ''];
      if (ln.input?.[2]) inputs.push(ln.input[2]);
      const outputs = keepSum ? [ln.output?.[0] ?? '', '', '', sum] : [ln.output?.[0] ?? ''];
      const eps = attrFloat(ln, 'epsilon', 1e-5) ?? 1e-5;
      g.replace(
        [add, ln],
        [makeNode('SkipLayerNormalization', inputs, outputs, `${ln.name ?? 'norm'}/Skip`, [floatAttr('epsilon', eps)], MS_DOMAIN)],
      );
      rewritten += 1;
    }
    if (rewritten > 0) importMsDomain(g.model);
    return { rewritten, refused };
  },
};

/**
 * Whether both operands of a residual sum are full `[B, N, D]` activations. Without shape
 * inference this is read from what produces them: a broadcast operand (a position table, a
 * per-item vector) comes from a Reshape/Unsqueeze/Expand of something small, which a residual
 * branch's last op (Add of a bias, Mul by a gate, MatMul) is not.
 */
function sameShapeOperands(g: GraphIndex, a: string, b: string): boolean {
  const residual = (v: string): boolean => {
    const p = g.producer(v);
    if (!p) return false;
    if (['MatMul', 'Gemm', 'MultiHeadAttention', 'SkipLayerNormalization', 'BiasGelu', 'Gelu', 'MatMulNBits'].includes(p.opType ?? ''))
      return true;
    if (p.opType === 'Add' || p.opType === 'Mul') return (p.input ?? []).some((i) => residual(i));
    return false;
  };
  return residual(a) && residual(b);
}
