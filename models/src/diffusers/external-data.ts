import onnxProto from 'onnx-proto';
import { moveToExternalData } from '../onnx/graph.js';

const { onnx } = onnxProto;

/**
 * Moves a model's initializers into an external data file, the way `onnx.save_model(...,
 * save_as_external_data=True)` does for models over 2 GB (optimum writes `model.onnx` +
 * `model.onnx_data`): each tensor's raw bytes go to `location` at an offset, and the tensor
 * keeps `data_location = EXTERNAL` with `location`/`offset`/`length` entries. onnxruntime finds
 * the file relative to the model's path, so a session must be created from the file path.
 *
 * Offsets are aligned to 4096 bytes (as onnx does for large tensors, so the data can be
 * memory-mapped); tensors smaller than `minBytes` stay inside the model.
 */
export function toExternalData(model: Uint8Array, location = 'model.onnx_data', minBytes = 256): { model: Uint8Array; data: Uint8Array } {
  const m = onnx.ModelProto.decode(model);
  const chunks = moveToExternalData(m.graph?.initializer ?? [], location, minBytes);
  const data = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    data.set(c, at);
    at += c.length;
  }
  return { model: onnx.ModelProto.encode(m).finish(), data };
}
