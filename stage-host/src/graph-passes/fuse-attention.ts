import type { GraphPass, PassRefusal } from './graph-pass.js';
import {
  attrInt,
  attrInts,
  floatAttr,
  importMsDomain,
  intAttr,
  makeNode,
  MS_DOMAIN,
  tensorValues,
  type GraphIndex,
  type NodeProto,
} from './onnx-model.js';

/**
 * Scaled dot-product attention as exporters write it — heads split by `Reshape [B, N, H, dh]`
 * and `Transpose`, `MatMul(q·s, kᵀ)`, `Softmax` over the last axis, `MatMul` with v, heads
 * merged by `Transpose` and `Reshape [B, N, H·dh]` — becomes one
 * `com.microsoft.MultiHeadAttention(q, k, v)` with `num_heads = H` and the product of the
 * graph's scalar factors as `scale` (the query's, the key's — torch's export scales both by
 * √s — and one after the product). Keys transposed by `[0,2,3,1]` or by `[0,2,1,3]` then
 * `[0,1,3,2]` are both read. A Softmax in any other surrounding is left and named.
 */
export const fuseAttention: GraphPass = {
  name: 'fuse-attention',
  run(g) {
    const refused: PassRefusal[] = [];
    let rewritten = 0;
    for (const softmax of g.nodes.filter((n) => n.opType === 'Softmax')) {
      const m = matchAttention(g, softmax);
      if (typeof m === 'string') {
        refused.push({ node: softmax.name ?? '', reason: m });
        continue;
      }
      const out = m.merge.output?.[0] ?? '';
      g.replace(m.nodes, [
        makeNode(
          'MultiHeadAttention',
          [m.q, m.k, m.v],
          [out],
          `${softmax.name ?? 'attention'}/MultiHeadAttention`,
          [intAttr('num_heads', m.heads), floatAttr('scale', m.scale)],
          MS_DOMAIN,
        ),
      ]);
      rewritten += 1;
    }
    if (rewritten > 0) importMsDomain(g.model);
    return { rewritten, refused };
  },
};

interface AttentionMatch {
  q: string;
  k: string;
  v: string;
  heads: number;
  scale: number;
  nodes: NodeProto[];
  merge: NodeProto;
}

function matchAttention(g: GraphIndex, softmax: NodeProto): AttentionMatch | string {
  const axis = attrInt(softmax, 'axis', -1);
  if (axis !== -1 && axis !== 3) return 'the softmax is not over the last axis';
  const nodes: NodeProto[] = [softmax];
  let scale = 1;
  // Scores, possibly scaled after the product.
  let scores = g.producer(softmax.input?.[0] ?? '');
  const post = scores ? scalarFactor(g, scores) : undefined;
  if (scores && post !== undefined) {
    if (!g.soleConsumer(scores.output?.[0] ?? '')) return 'the scaled scores are read elsewhere';
    nodes.push(scores);
    scale *= post;
    scores = g.producer(scores.input?.[0] ?? '');
  }
  if (!scores || scores.opType !== 'MatMul' || !g.soleConsumer(scores.output?.[0] ?? '')) return 'the softmax does not read q·kᵀ alone';
  nodes.push(scores);
  const q = headsIn(g, scores.input?.[0] ?? '', 'query', nodes);
  if (typeof q === 'string') return q;
  const k = headsIn(g, scores.input?.[1] ?? '', 'key', nodes);
  if (typeof k === 'string') return k;
  const pv = g.soleConsumer(softmax.output?.[0] ?? '');
  if (!pv || pv.opType !== 'MatMul' || pv.input?.[0] !== softmax.output?.[0]) return 'the probabilities are not multiplied by v alone';
  nodes.push(pv);
  const v = headsIn(g, pv.input?.[1] ?? '', 'value', nodes);
  if (typeof v === 'string') return v;
  const back = g.soleConsumer(pv.output?.[0] ?? '');
  if (!back || back.opType !== 'Transpose' || !samePerm(attrInts(back, 'perm'), [0, 2, 1, 3])) return 'the heads are not transposed back';
  const merge = g.soleConsumer(back.output?.[0] ?? '');
  const mergeShape = merge?.opType === 'Reshape' ? shapeValues(g, merge.input?.[1] ?? '') : undefined;
  if (!merge || !mergeShape || mergeShape.length !== 3) return 'the heads are not merged into [B, N, H·dh]';
  nodes.push(back, merge);
  if (q.heads !== k.heads || q.heads !== v.heads || q.headDim !== k.headDim) return 'q, k and v are split into different heads';
  const width = mergeShape[2];
  if (width > 0 && width !== v.heads * v.headDim) return `the heads merge into ${width}, not ${v.heads}×${v.headDim}`;
  return { q: q.source, k: k.source, v: v.source, heads: q.heads, scale: scale * q.factor * k.factor, nodes, merge };
}

interface Heads {
  source: string;
  heads: number;
  headDim: number;
  factor: number;
}

/**
 * Walks back from one operand of the attention products to the `[B, N, H·dh]` value it splits:
 * optional scalar factor, the head transpose(s), the `Reshape [B, N, H, dh]`.
 */
function headsIn(g: GraphIndex, value: string, role: 'query' | 'key' | 'value', nodes: NodeProto[]): Heads | string {
  let factor = 1;
  let n = g.producer(value);
  const sole = (x: NodeProto): boolean => g.soleConsumer(x.output?.[0] ?? '') !== undefined;
  const f = n ? scalarFactor(g, n) : undefined;
  if (n && f !== undefined && sole(n)) {
    nodes.push(n);
    factor *= f;
    n = g.producer(n.input?.[0] ?? '');
  }
  if (!n || n.opType !== 'Transpose' || !sole(n)) return `the ${role} is not split into heads by a Transpose`;
  const perm = attrInts(n, 'perm');
  const want = role === 'key' ? [0, 2, 3, 1] : [0, 2, 1, 3];
  nodes.push(n);
  if (!samePerm(perm, want)) {
    // Keys may be transposed twice: heads first, then the last two axes.
    if (role !== 'key' || !samePerm(perm, [0, 1, 3, 2])) return `the ${role}'s heads are transposed by [${(perm ?? []).join(',')}]`;
    n = g.producer(n.input?.[0] ?? '');
    const f2 = n ? scalarFactor(g, n) : undefined;
    if (n && f2 !== undefined && sole(n)) {
      nodes.push(n);
      factor *= f2;
      n = g.producer(n.input?.[0] ?? '');
    }
    if (!n || n.opType !== 'Transpose' || !samePerm(attrInts(n, 'perm'), [0, 2, 1, 3]) || !sole(n))
      return 'the key is not split into heads';
    nodes.push(n);
  }
  const split = g.producer(n.input?.[0] ?? '');
  const shape = split?.opType === 'Reshape' ? shapeValues(g, split.input?.[1] ?? '') : undefined;
  if (!split || !shape || shape.length !== 4 || !sole(split)) return `the ${role} is not reshaped into [B, N, H, dh]`;
  const [heads, headDim] = shape.slice(2);
  if (!(heads > 0 && headDim > 0)) return `the ${role}'s head count or width is not a constant`;
  nodes.push(split);
  return { source: split.input?.[0] ?? '', heads, headDim, factor };
}

/** The factor of `Mul(x, c)` or `Div(x, c)` with a scalar constant c, else undefined. */
function scalarFactor(g: GraphIndex, n: NodeProto): number | undefined {
  if (n.opType !== 'Mul' && n.opType !== 'Div') return undefined;
  const c = g.scalar(n.input?.[1] ?? '');
  if (c !== undefined) return n.opType === 'Mul' ? c : 1 / c;
  if (n.opType === 'Mul') {
    const c0 = g.scalar(n.input?.[0] ?? '');
    if (c0 !== undefined) {
      n.input = [n.input?.[1] ?? '', n.input?.[0] ?? ''];
      return c0;
    }
  }
  return undefined;
}

/**
 * A shape operand's values: a constant, or a `Concat` of pieces whose trailing ones are
 * constants (computed leading dims read as 0, "as is").
 */
function shapeValues(g: GraphIndex, name: string): number[] | undefined {
  const t = g.constant(name);
  if (t) return tensorValues(t);
  const p = g.producer(name);
  if (p?.opType !== 'Concat') return undefined;
  const out: number[] = [];
  for (const i of p.input ?? []) {
    const c = g.constant(i);
    if (c) out.push(...tensorValues(c));
    else out.push(0);
  }
  return out;
}

function samePerm(a: number[] | undefined, b: number[]): boolean {
  return a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);
}
