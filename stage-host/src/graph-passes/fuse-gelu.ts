import type { GraphPass, PassRefusal } from './graph-pass.js';
import { importMsDomain, makeNode, MS_DOMAIN, type GraphIndex, type NodeProto } from './onnx-model.js';

const near = (v: number | undefined, want: number): boolean => v !== undefined && Math.abs(v - want) <= 1e-3 * Math.abs(want);

/**
 * The exact (erf) GELU as exporters write it — `0.5 · x · (1 + erf(x / √2))` in five nodes
 * (`Div` or `Mul` by 1/√2, `Erf`, `Add` 1, two `Mul`s, in either order) — becomes one
 * `com.microsoft.Gelu`; when `x` is a `MatMul` plus a 1-D bias read by nothing else, one
 * `com.microsoft.BiasGelu(matmul, bias)`. Same formula, one kernel.
 */
export const fuseGelu: GraphPass = {
  name: 'fuse-gelu',
  run(g) {
    const refused: PassRefusal[] = [];
    let rewritten = 0;
    for (const erf of g.nodes.filter((n) => n.opType === 'Erf')) {
      const m = matchGelu(g, erf);
      if (typeof m === 'string') {
        refused.push({ node: erf.name ?? '', reason: m });
        continue;
      }
      const name = `${m.output.name ?? 'gelu'}/Gelu`;
      const out = m.output.output?.[0] ?? '';
      const bias = biasOf(g, m.x, m.nodes);
      if (bias) {
        g.replace([bias.add, ...m.nodes], [makeNode('BiasGelu', [bias.input, bias.bias], [out], name, [], MS_DOMAIN)]);
      } else {
        g.replace(m.nodes, [makeNode('Gelu', [m.x], [out], name, [], MS_DOMAIN)]);
      }
      rewritten += 1;
    }
    if (rewritten > 0) importMsDomain(g.model);
    return { rewritten, refused };
  },
};

interface GeluMatch {
  x: string;
  nodes: NodeProto[];
  output: NodeProto;
}

function matchGelu(g: GraphIndex, erf: NodeProto): GeluMatch | string {
  const scaled = g.producer(erf.input?.[0] ?? '');
  if (!scaled || !(isBinaryConst(g, scaled, 'Div', Math.SQRT2) || isBinaryConst(g, scaled, 'Mul', Math.SQRT1_2)))
    return 'the Erf input is not x/√2';
  const x = scaled.input?.[0] ?? '';
  const add = g.soleConsumer(erf.output?.[0] ?? '');
  if (!add || !isBinaryConst(g, add, 'Add', 1)) return 'the Erf output is not followed by +1';
  const mul = g.soleConsumer(add.output?.[0] ?? '');
  if (!mul || mul.opType !== 'Mul') return 'erf(x/√2)+1 is not multiplied';
  const other = (mul.input ?? []).find((i) => i !== add.output?.[0]) ?? '';
  if (other === x) {
    // (x · (1 + erf)) · 0.5
    const half = g.soleConsumer(mul.output?.[0] ?? '');
    if (!half || !isBinaryConst(g, half, 'Mul', 0.5)) return 'x·(1+erf(x/√2)) is not halved';
    return { x, nodes: [scaled, erf, add, mul, half], output: half };
  }
  const halfX = g.producer(other);
  if (halfX && isBinaryConst(g, halfX, 'Mul', 0.5) && halfX.input?.[0] === x && g.soleConsumer(other)) {
    return { x, nodes: [halfX, scaled, erf, add, mul], output: mul };
  }
  return 'erf(x/√2)+1 is multiplied by something other than x or x/2';
}

/** `op(x, c)` with a scalar constant `c ≈ value` as the second input. */
function isBinaryConst(g: GraphIndex, n: NodeProto, op: string, value: number): boolean {
  if (n.opType !== op || (n.input ?? []).length !== 2) return false;
  const [a, b] = n.input ?? [];
  if (near(g.scalar(b ?? ''), value)) return true;
  // Add and Mul commute: the constant may come first.
  if ((op === 'Add' || op === 'Mul') && near(g.scalar(a ?? ''), value)) {
    n.input = [b ?? '', a ?? ''];
    return true;
  }
  return false;
}

/** `x = MatMul(..) + bias` (1-D constant), with `x` read only by the GELU's nodes. */
function biasOf(g: GraphIndex, x: string, gelu: NodeProto[]): { add: NodeProto; input: string; bias: string } | undefined {
  const add = g.producer(x);
  if (!add || add.opType !== 'Add' || g.isGraphOutput(x)) return undefined;
  if (!g.consumersOf(x).every((c) => gelu.includes(c))) return undefined;
  const [a, b] = add.input ?? [];
  for (const [input, bias] of [
    [a, b],
    [b, a],
  ] as const) {
    const t = g.constant(bias ?? '');
    if (t && (t.dims ?? []).length === 1 && g.producer(input ?? '')?.opType === 'MatMul')
      return { add, input: input ?? '', bias: bias ?? '' };
  }
  return undefined;
}
