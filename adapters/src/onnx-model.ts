import onnxProto from 'onnx-proto';
import type { ModelProto } from './graph-targets.js';

const { onnx } = onnxProto;

/** An ONNX model's bytes → ModelProto (weights kept as views of `bytes`). */
export function decodeModel(bytes: Uint8Array): ModelProto {
  return onnx.ModelProto.decode(bytes);
}

/** ModelProto → bytes. */
export function encodeModel(model: ModelProto): Uint8Array {
  return onnx.ModelProto.encode(model).finish();
}

/** The external data files the model's weights live in (`location` of each external initializer), in order. */
export function externalDataFiles(model: ModelProto): string[] {
  const files = new Set<string>();
  for (const t of model.graph?.initializer ?? []) {
    if (t.dataLocation !== onnx.TensorProto.DataLocation.EXTERNAL) continue;
    const location = (t.externalData ?? []).find((e) => e.key === 'location')?.value;
    if (location) files.add(location);
  }
  return [...files];
}
