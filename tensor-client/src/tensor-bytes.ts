import { crc32c } from '@node-rs/crc32';
import { type Dtype, invalidParameter } from '@diffmesh/core';

/**
 * Tensor bytes are little-endian element data, the layout of typed arrays on every platform
 * diffmesh runs on. These helpers convert without copying whenever alignment allows.
 */

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Readonly<Record<Dtype, number>> = Object.freeze({
  float32: 4,
  float16: 2,
  int64: 8,
  int32: 4,
  uint8: 1,
});

/** Number of elements of a shape (1 for a scalar `[]`). */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Bytes a tensor of `shape` and `dtype` occupies. */
export function byteLengthOf(shape: readonly number[], dtype: Dtype): number {
  return elementCount(shape) * DTYPE_BYTES[dtype];
}

/** `crc32c:<8 hex digits>` of the bytes (CRC-32C, Castagnoli). */
export function checksumOf(data: Uint8Array): string {
  return `crc32c:${(crc32c(data) >>> 0).toString(16).padStart(8, '0')}`;
}

/** A byte view of any typed array or DataView, sharing its memory. */
export function toBytes(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/**
 * The bytes as a Float32Array: a view of the same memory when the offset is 4-byte aligned,
 * an aligned copy otherwise. Throws when the length is not a multiple of 4.
 */
export function float32View(data: Uint8Array): Float32Array {
  return typedView(data, 4, Float32Array, 'float32');
}

/** Typed array matching each dtype (float16 as raw 16-bit words). */
export interface DtypeArrays {
  float32: Float32Array;
  float16: Uint16Array;
  int64: BigInt64Array;
  int32: Int32Array;
  uint8: Uint8Array;
}

/** The bytes as the typed array of `dtype`, sharing memory when alignment allows (see {@link float32View}). */
export function tensorView<D extends Dtype>(data: Uint8Array, dtype: D): DtypeArrays[D] {
  switch (dtype) {
    case 'float32':
      return float32View(data) as DtypeArrays[D];
    case 'float16':
      return typedView(data, 2, Uint16Array, dtype) as DtypeArrays[D];
    case 'int64':
      return typedView(data, 8, BigInt64Array, dtype) as DtypeArrays[D];
    case 'int32':
      return typedView(data, 4, Int32Array, dtype) as DtypeArrays[D];
    case 'uint8':
      return data as DtypeArrays[D];
    default:
      throw new TypeError(`unknown dtype ${String(dtype)}`);
  }
}

interface TypedCtor<A> {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): A;
  new (length: number): A;
}

function typedView<A extends ArrayBufferView>(data: Uint8Array, size: number, Ctor: TypedCtor<A>, dtype: string): A {
  if (data.byteLength % size !== 0) {
    throw new RangeError(`${data.byteLength} bytes is not a whole number of ${dtype} elements`);
  }
  const length = data.byteLength / size;
  if (data.byteOffset % size === 0) return new Ctor(data.buffer, data.byteOffset, length);
  const copy = new Ctor(length);
  toBytes(copy).set(data);
  return copy;
}

/**
 * Validates what a store is asked to put, naming the bad field: `request_id` and `name`
 * (non-empty, no ":"), `dtype`, `shape`, and `data` (a Uint8Array of exactly shape × dtype bytes).
 */
export function checkPutInput(input: { requestId: unknown; name: unknown; dtype: unknown; shape: unknown; data: unknown }): void {
  for (const [field, value] of [
    ['request_id', input.requestId],
    ['name', input.name],
  ] as const) {
    if (typeof value !== 'string' || value === '' || value.includes(':')) {
      throw invalidParameter(field, `must be a non-empty string without ":", got ${JSON.stringify(value)}`);
    }
  }
  const dtype = input.dtype as Dtype;
  if (typeof dtype !== 'string' || !(dtype in DTYPE_BYTES)) throw invalidParameter('dtype', `unknown dtype ${JSON.stringify(dtype)}`);
  const shape = input.shape as number[];
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw invalidParameter('shape', `must be a list of non-negative integers, got ${JSON.stringify(shape)}`);
  }
  if (!(input.data instanceof Uint8Array)) throw invalidParameter('data', 'must be a Uint8Array');
  const expected = byteLengthOf(shape, dtype);
  if (input.data.byteLength !== expected) {
    throw invalidParameter(
      'data',
      `${input.data.byteLength} bytes do not match shape [${shape.join(', ')}] of ${dtype} (${expected} bytes)`,
    );
  }
}

/**
 * Checks a read's range against an object of `size` bytes and returns `[start, end)`.
 * Throws INVALID_ARGUMENT naming `offset` or `length` when it runs past the end.
 */
export function rangeOf(objectId: string, size: number, opts: { offset?: number; length?: number } = {}): [number, number] {
  const offset = opts.offset ?? 0;
  const length = opts.length ?? 0;
  if (!Number.isSafeInteger(offset) || offset < 0) throw invalidParameter('offset', `must be a non-negative integer, got ${offset}`);
  if (!Number.isSafeInteger(length) || length < 0) throw invalidParameter('length', `must be a non-negative integer, got ${length}`);
  if (offset > size) throw invalidParameter('offset', `${offset} is past the end of object ${objectId} (${size} bytes)`);
  const end = length === 0 ? size : offset + length;
  if (end > size)
    throw invalidParameter('length', `offset ${offset} + length ${length} is past the end of object ${objectId} (${size} bytes)`);
  return [offset, end];
}
