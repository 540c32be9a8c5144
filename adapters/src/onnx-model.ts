import { open } from 'node:fs/promises';
import path from 'node:path';
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

/**
 * Reads every external initializer's bytes into the model (`raw_data`), as `onnx.load` with
 * `load_external_data=True` does; `baseDir` is the model file's folder. For models whose
 * weights fit a protobuf (< 2 GiB).
 */
export async function inlineExternalData(model: ModelProto, baseDir: string): Promise<void> {
  for (const t of model.graph?.initializer ?? []) {
    if (t.dataLocation !== onnx.TensorProto.DataLocation.EXTERNAL) continue;
    const entry = (key: string) => (t.externalData ?? []).find((e) => e.key === key)?.value;
    const location = entry('location');
    if (!location) continue;
    const offset = Number(entry('offset') ?? 0);
    const handle = await open(path.join(baseDir, location), 'r');
    try {
      const length = entry('length') !== undefined ? Number(entry('length')) : (await handle.stat()).size - offset;
      const bytes = new Uint8Array(length);
      await handle.read(bytes, 0, length, offset);
      t.rawData = bytes;
    } finally {
      await handle.close();
    }
    t.externalData = [];
    t.dataLocation = onnx.TensorProto.DataLocation.DEFAULT;
  }
}
