import onnxProto from 'onnx-proto';
import type { GraphLinear, ModelProto, NodeProto } from './graph-targets.js';

const { onnx } = onnxProto;

/** The graph inputs that feed one layer's LoRA branch. */
export interface LoraSlot {
  module: string;
  /** [batch, in, rank]: the down matrices (transposed), one per batch item. */
  downInput: string;
  /** [batch, rank, out]: the up matrices (transposed, scaled), one per batch item. */
  upInput: string;
  inDim: number;
  outDim: number;
  /** TensorProto data type of both inputs (the layer's weight type). */
  elemType: number;
}

/** The graph input names of a layer's branch. */
export function loraInputNames(module: string): { down: string; up: string } {
  return { down: `lora/${module}/down`, up: `lora/${module}/up` };
}

function valueInfo(name: string, elemType: number, dims: Array<string | number>): onnxProto.onnx.IValueInfoProto {
  return new onnx.ValueInfoProto({
    name,
    type: new onnx.TypeProto({
      tensorType: new onnx.TypeProto.Tensor({
        elemType,
        shape: new onnx.TensorShapeProto({
          dim: dims.map((d) => new onnx.TensorShapeProto.Dimension(typeof d === 'number' ? { dimValue: d } : { dimParam: d })),
        }),
      }),
    }),
  });
}

function int64s(name: string, values: number[]): onnxProto.onnx.ITensorProto {
  return new onnx.TensorProto({
    name,
    dataType: onnx.TensorProto.DataType.INT64,
    dims: [values.length],
    rawData: new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer),
  });
}

/**
 * Nodes that turn layer `l`'s output y = x·W (+ b) into y + (x·D)·U, with D [B, in, R] and
 * U [B, R, out] graph inputs: x is seen as [B, N, in] (its leading dimension is the batch, any
 * others are folded into N), and the branch's result is reshaped back to y's shape.
 */
function branchNodes(
  l: GraphLinear,
  slot: LoraSlot,
  baseOut: string,
  consts: { zero: string; one: string; minusOne: string },
): NodeProto[] {
  const p = `/lora/${l.module}`;
  const v = (s: string) => `${p}/${s}`;
  const n = (opType: string, input: string[], output: string, attribute: onnxProto.onnx.IAttributeProto[] = []): NodeProto =>
    new onnx.NodeProto({ name: v(output), opType, input, output: [v(output)], attribute });
  const axis0 = new onnx.AttributeProto({ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: 0 });
  return [
    n('Shape', [l.input], 'x_shape'),
    n('Slice', [v('x_shape'), consts.zero, consts.one], 'batch'),
    n('Concat', [v('batch'), consts.minusOne, v('in_dim')], 'x3_shape', [axis0]),
    n('Reshape', [l.input, v('x3_shape')], 'x3'),
    n('MatMul', [v('x3'), slot.downInput], 'xd'),
    n('MatMul', [v('xd'), slot.upInput], 'xdu'),
    n('Shape', [baseOut], 'y_shape'),
    n('Reshape', [v('xdu'), v('y_shape')], 'delta'),
  ];
}

/**
 * The LoRA pass: a copy of `model` in which each of `linears` computes x·W + (x·D)·U, with D
 * and U inputs of the graph per batch item (see {@link LoraSlot}), so one session serves
 * requests with different adapters, or none (zeros), in one run. The weights are shared with
 * `model`, not copied; `model` itself is left as it was. Layers are found with
 * `findGraphLinears`.
 */
export function addLoraBranches(model: ModelProto, linears: GraphLinear[]): { model: ModelProto; slots: LoraSlot[] } {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  const consts = { zero: '/lora/const/zero', one: '/lora/const/one', minusOne: '/lora/const/minus_one' };
  // No constants for a graph without layers: onnxruntime warns of unused initializers.
  const constants = linears.length > 0 ? [int64s(consts.zero, [0]), int64s(consts.one, [1]), int64s(consts.minusOne, [-1])] : [];
  const initializers = [...(graph.initializer ?? []), ...constants];
  const inputs = [...(graph.input ?? [])];
  const byNode = new Map(linears.map((l) => [l.node, l]));
  const slots: LoraSlot[] = [];
  const nodes: NodeProto[] = [];
  for (const node of graph.node ?? []) {
    const l = byNode.get(node.name ?? '');
    if (!l) {
      nodes.push(node);
      continue;
    }
    const names = loraInputNames(l.module);
    const slot: LoraSlot = {
      module: l.module,
      downInput: names.down,
      upInput: names.up,
      inDim: l.inDim,
      outDim: l.outDim,
      elemType: l.elemType,
    };
    slots.push(slot);
    inputs.push(valueInfo(names.down, l.elemType, ['lora_batch', l.inDim, 'lora_rank']));
    inputs.push(valueInfo(names.up, l.elemType, ['lora_batch', 'lora_rank', l.outDim]));
    initializers.push(int64s(`/lora/${l.module}/in_dim`, [l.inDim]));
    const baseOut = `/lora/${l.module}/base`;
    nodes.push(new onnx.NodeProto({ ...node, output: [baseOut, ...(node.output ?? []).slice(1)] }));
    nodes.push(...branchNodes(l, slot, baseOut, consts));
    nodes.push(
      new onnx.NodeProto({ name: `/lora/${l.module}/Add`, opType: 'Add', input: [baseOut, `/lora/${l.module}/delta`], output: [l.output] }),
    );
  }
  if (slots.length !== linears.length) {
    const missing = linears.find((l) => !slots.some((s) => s.module === l.module));
    throw new Error(`LoRA pass: node ${missing?.node} of ${missing?.module} is not in the graph`);
  }
  const newGraph = new onnx.GraphProto({ ...graph, node: nodes, input: inputs, initializer: initializers });
  return { model: new onnx.ModelProto({ ...model, graph: newGraph }), slots };
}
