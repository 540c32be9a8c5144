import onnxProto from 'onnx-proto';
import { fromFloat16, toFloat16 } from '@diffmesh/tensor-client';
import type { AdapterUse } from './lora-feeds.js';
import { FLOAT16, type ModelProto, type TensorProto } from './graph-targets.js';
import type { AdapterComponent } from './lora-file.js';

const { onnx } = onnxProto;

function weightValues(t: TensorProto): Float32Array {
  if (t.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) throw new Error(`merge: weight ${t.name} is in external data`);
  const raw = t.rawData && t.rawData.length > 0 ? new Uint8Array(t.rawData) : undefined; // a copy, even of a Buffer
  if (t.dataType === FLOAT16) {
    if (raw) return fromFloat16(new Uint16Array(raw.buffer, 0, raw.length / 2));
    return fromFloat16(Uint16Array.from(t.int32Data ?? []));
  }
  if (raw) return new Float32Array(raw.buffer, 0, raw.length / 4);
  return Float32Array.from(t.floatData ?? []);
}

/**
 * A copy of `model` with the adapters merged into the weights, W += Σ s·ΔWᵀ (laid out as each
 * weight is): the same function as the LoRA branches compute, as one plain graph. The reference
 * the branches are checked against, and the "merged weights" side of the adapters benchmark.
 */
export function mergeLora(model: ModelProto, component: AdapterComponent, uses: AdapterUse[]): ModelProto {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  const replaced = new Map<string, TensorProto>();
  for (const { adapter, scale } of uses) {
    for (const { target: t, linear: l } of adapter.components[component]?.values() ?? []) {
      const original = replaced.get(l.weight) ?? (graph.initializer ?? []).find((x) => x.name === l.weight);
      if (!original) throw new Error(`merge: no weight ${l.weight}`);
      const w = weightValues(original);
      const s = scale * t.alphaScale;
      for (let o = 0; o < t.outDim; o += 1) {
        for (let i = 0; i < t.inDim; i += 1) {
          let d = 0;
          for (let r = 0; r < t.rank; r += 1) d += t.up[o * t.rank + r] * t.down[r * t.inDim + i];
          w[l.layout === 'in_out' ? i * t.outDim + o : o * t.inDim + i] += s * d;
        }
      }
      const bytes = original.dataType === FLOAT16 ? new Uint8Array(toFloat16(w).buffer) : new Uint8Array(w.buffer);
      replaced.set(l.weight, new onnx.TensorProto({ name: l.weight, dataType: original.dataType, dims: original.dims, rawData: bytes }));
    }
  }
  const initializer = (graph.initializer ?? []).map((t) => replaced.get(t.name ?? '') ?? t);
  return new onnx.ModelProto({ ...model, graph: new onnx.GraphProto({ ...graph, initializer }) });
}
