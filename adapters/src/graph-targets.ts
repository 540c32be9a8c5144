import onnxProto from 'onnx-proto';
import { kohyaFlatName } from './kohya-names.js';

const { onnx } = onnxProto;
export type ModelProto = InstanceType<typeof onnx.ModelProto>;
export type NodeProto = onnxProto.onnx.INodeProto;
export type TensorProto = onnxProto.onnx.ITensorProto;

/** TensorProto.DataType numbers of the float weights a LoRA branch can sit beside. */
export const FLOAT = onnx.TensorProto.DataType.FLOAT;
export const FLOAT16 = onnx.TensorProto.DataType.FLOAT16;

/** A linear layer of an exported graph that a LoRA can target. */
export interface GraphLinear {
  /** diffusers' module path (`down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q`). */
  module: string;
  /** The MatMul or Gemm node (its name, as the graph has it). */
  node: string;
  /** The node's input that carries the activations x. */
  input: string;
  /** The node's output, y = x·W (+ bias). */
  output: string;
  /** The weight initializer. */
  weight: string;
  /** How the initializer is laid out: `in_out` (MatMul's [in, out]) or `out_in` (torch's [out, in], behind a Transpose or Gemm transB). */
  layout: 'in_out' | 'out_in';
  inDim: number;
  outDim: number;
  /** TensorProto data type of the weight (FLOAT or FLOAT16). */
  elemType: number;
}

/** The linear layers of a graph by module path, and by kohya's flattened name. */
export interface GraphLinears {
  byModule: Map<string, GraphLinear>;
  byFlatName: Map<string, GraphLinear>;
}

/** `/down_blocks.0/attentions.0/…/to_q/MatMul` → `down_blocks.0.attentions.0.….to_q`; undefined for other names. */
export function moduleOfNodeName(name: string, opType: string): string | undefined {
  if (!name.startsWith('/')) return undefined;
  const parts = name.slice(1).split('/');
  const last = parts.pop();
  if (last !== opType || parts.length === 0) return undefined;
  return parts.join('.');
}

function attrInt(node: NodeProto, name: string, fallback: number): number {
  const a = (node.attribute ?? []).find((x) => x.name === name);
  return a ? Number(a.i ?? fallback) : fallback;
}

/**
 * Finds the linear layers of an exported model the way the exporters leave them: a MatMul or
 * Gemm whose node name carries the module path (torch.onnx / optimum:
 * `/…/to_q/MatMul`, weight an `onnx::MatMul_…` initializer [in, out]), or whose weight is an
 * initializer named `<module>.weight` — directly, behind a Transpose (perm [1, 0]) of it, or as
 * Gemm's B with transB = 1. Only layers whose weight is a float32/float16 initializer count.
 */
export function findGraphLinears(model: ModelProto): GraphLinears {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  const inits = new Map<string, TensorProto>();
  for (const t of graph.initializer ?? []) if (t.name) inits.set(t.name, t);
  const transposes = new Map<string, string>();
  for (const n of graph.node ?? []) {
    if (n.opType !== 'Transpose' || !n.input?.[0] || !inits.has(n.input[0])) continue;
    const perm = (n.attribute ?? []).find((a) => a.name === 'perm')?.ints?.map(Number);
    if (!perm || (perm[0] === 1 && perm[1] === 0)) transposes.set(n.output?.[0] ?? '', n.input[0]);
  }
  const byModule = new Map<string, GraphLinear>();
  for (const n of graph.node ?? []) {
    if ((n.opType !== 'MatMul' && n.opType !== 'Gemm') || (n.domain ?? '') !== '') continue;
    const [x, wIn] = n.input ?? [];
    if (!x || !wIn) continue;
    let weight = wIn;
    let layout: GraphLinear['layout'] = 'in_out';
    if (transposes.has(wIn)) {
      weight = transposes.get(wIn) as string;
      layout = 'out_in';
    }
    if (n.opType === 'Gemm') {
      if (attrInt(n, 'transA', 0) !== 0) continue;
      if (attrInt(n, 'transB', 0) === 1) layout = layout === 'in_out' ? 'out_in' : 'in_out';
    }
    const init = inits.get(weight);
    if (!init || (init.dims ?? []).length !== 2) continue;
    const elemType = init.dataType ?? 0;
    if (elemType !== FLOAT && elemType !== FLOAT16) continue;
    const module =
      moduleOfNodeName(n.name ?? '', n.opType) ?? (weight.endsWith('.weight') ? weight.slice(0, -'.weight'.length) : undefined);
    if (!module || byModule.has(module)) continue;
    const [d0, d1] = (init.dims ?? []).map(Number);
    byModule.set(module, {
      module,
      node: n.name ?? '',
      input: x,
      output: n.output?.[0] ?? '',
      weight,
      layout,
      inDim: layout === 'in_out' ? d0 : d1,
      outDim: layout === 'in_out' ? d1 : d0,
      elemType,
    });
  }
  const byFlatName = new Map<string, GraphLinear>();
  for (const l of byModule.values()) byFlatName.set(kohyaFlatName(l.module), l);
  return { byModule, byFlatName };
}
