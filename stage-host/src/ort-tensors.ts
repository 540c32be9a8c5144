import ort from 'onnxruntime-node';
import { Code, DiffmeshError } from '@diffmesh/core';
import { fromFloat16, toFloat16 } from '@diffmesh/tensor-client';

/** Element types diffmesh feeds ONNX graphs with. */
export type FeedType = 'float32' | 'float16' | 'int64' | 'int32';

/**
 * A tensor of the element type a graph input declares, from plain numbers: float16 inputs get
 * rounded halves, integer inputs truncated values (as numpy's `astype` does), float32 as is.
 */
export function feedTensor(type: string, values: ArrayLike<number>, dims: readonly number[]): ort.Tensor {
  switch (type) {
    case 'float32':
      return new ort.Tensor('float32', values instanceof Float32Array ? values : Float32Array.from(values), dims);
    case 'float16':
      return new ort.Tensor('float16', toFloat16(values), dims);
    case 'int64':
      return new ort.Tensor('int64', BigInt64Array.from(Array.from(values, (v) => BigInt(Math.trunc(v)))), dims);
    case 'int32':
      return new ort.Tensor('int32', Int32Array.from(Array.from(values, (v) => Math.trunc(v))), dims);
    default:
      throw new DiffmeshError(Code.FAILED_PRECONDITION, 'MODEL_LOAD_FAILED', `cannot feed a graph input of type ${type}`);
  }
}

/** A float output (float32 or float16) as float32 values. */
export function floatOutput(tensor: ort.Tensor): Float32Array {
  if (tensor.type === 'float32') return tensor.data as Float32Array;
  if (tensor.type === 'float16') {
    const data = tensor.data as unknown;
    return data instanceof Uint16Array ? fromFloat16(data) : Float32Array.from(data as ArrayLike<number>);
  }
  throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', `expected a float output, got ${tensor.type}`);
}
