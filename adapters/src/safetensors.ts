import { fromFloat16, toFloat16 } from '@diffmesh/tensor-client';
import { adapterFileError } from './adapter-error.js';

/**
 * A reader of the safetensors format (huggingface/safetensors, `docs/source/index.mdx`): an
 * 8-byte little-endian header length N, N bytes of JSON (`{ name: { dtype, shape,
 * data_offsets: [begin, end] }, "__metadata__": { string: string } }`, offsets relative to the
 * end of the header), then the tensors' bytes, little-endian, row-major. Only the float types
 * a LoRA holds are read (F32, F16, BF16, returned as float32); anything else, and any header
 * that does not describe the bytes exactly, is refused naming the file and the tensor.
 */

/** Element types a LoRA file may hold, with their sizes in bytes. */
const DTYPE_BYTES = { F32: 4, F16: 2, BF16: 2 } as const;
export type SafetensorsDtype = keyof typeof DTYPE_BYTES;

/** One tensor of a file, widened to float32. */
export interface SafetensorsTensor {
  dtype: SafetensorsDtype;
  shape: number[];
  data: Float32Array;
}

export interface SafetensorsFile {
  /** `__metadata__` (string → string); empty when the file has none. */
  metadata: Record<string, string>;
  /** Tensors in the order of the header. */
  tensors: Map<string, SafetensorsTensor>;
}

/** Largest JSON header accepted (the format's own reader stops at 100 MB). */
export const MAX_HEADER_BYTES = 100_000_000;

interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

/** Parses a whole file's bytes. `file` names it in errors. */
export function parseSafetensors(bytes: Uint8Array, file: string): SafetensorsFile {
  if (bytes.length < 8)
    throw adapterFileError(file, `truncated: ${bytes.length} bytes, a safetensors file starts with an 8-byte header length`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  if (headerLength > MAX_HEADER_BYTES)
    throw adapterFileError(file, `header length ${headerLength} is over ${MAX_HEADER_BYTES} bytes: not a safetensors file`);
  if (8 + headerLength > bytes.length) {
    throw adapterFileError(
      file,
      `truncated: the header says ${headerLength} bytes of JSON, the file has ${bytes.length - 8} after the length`,
    );
  }
  const header = parseHeader(bytes.subarray(8, 8 + headerLength), file);
  const body = bytes.subarray(8 + headerLength);
  const metadata = readMetadata(header.__metadata__, file);
  const tensors = new Map<string, SafetensorsTensor>();
  const ranges: Array<[number, number, string]> = [];
  for (const [name, raw] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const entry = checkEntry(name, raw, body.length, file);
    ranges.push([entry.data_offsets[0], entry.data_offsets[1], name]);
    const dtype = entry.dtype as SafetensorsDtype;
    tensors.set(name, { dtype, shape: entry.shape, data: decode(dtype, body.subarray(entry.data_offsets[0], entry.data_offsets[1])) });
  }
  ranges.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < ranges.length; i += 1) {
    if (ranges[i][0] < ranges[i - 1][1])
      throw adapterFileError(file, `tensors ${ranges[i - 1][2]} and ${ranges[i][2]} overlap`, { key: ranges[i][2] });
  }
  return { metadata, tensors };
}

function parseHeader(json: Uint8Array, file: string): Record<string, unknown> {
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(json));
  } catch {
    throw adapterFileError(file, 'damaged: the header is not JSON');
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header))
    throw adapterFileError(file, 'damaged: the header is not a JSON object');
  return header as Record<string, unknown>;
}

function readMetadata(raw: unknown, file: string): Record<string, string> {
  if (raw === undefined) return {};
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw adapterFileError(file, '__metadata__ is not an object');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== 'string') throw adapterFileError(file, `__metadata__.${k} is not a string`);
    out[k] = v;
  }
  return out;
}

function checkEntry(name: string, raw: unknown, bodyLength: number, file: string): HeaderEntry {
  const e = raw as Partial<HeaderEntry> | null;
  if (!e || typeof e !== 'object' || typeof e.dtype !== 'string' || !Array.isArray(e.shape) || !Array.isArray(e.data_offsets)) {
    throw adapterFileError(file, `tensor ${name}: entry needs dtype, shape and data_offsets`, { key: name });
  }
  if (!(e.dtype in DTYPE_BYTES)) {
    throw adapterFileError(file, `tensor ${name}: dtype ${e.dtype} is not a LoRA weight type (F32, F16, BF16)`, { key: name });
  }
  if (!e.shape.every((d) => Number.isSafeInteger(d) && d >= 0))
    throw adapterFileError(file, `tensor ${name}: shape is not a list of sizes`, { key: name });
  const [begin, end] = e.data_offsets;
  if (e.data_offsets.length !== 2 || !Number.isSafeInteger(begin) || !Number.isSafeInteger(end) || begin < 0 || end < begin) {
    throw adapterFileError(file, `tensor ${name}: data_offsets is not [begin, end]`, { key: name });
  }
  if (end > bodyLength) throw adapterFileError(file, `truncated: tensor ${name} ends at byte ${end} of ${bodyLength}`, { key: name });
  const expected = e.shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[e.dtype as SafetensorsDtype];
  if (end - begin !== expected) {
    throw adapterFileError(file, `tensor ${name}: ${end - begin} bytes for ${e.dtype} [${e.shape.join(', ')}] (${expected} expected)`, {
      key: name,
    });
  }
  return e as HeaderEntry;
}

function decode(dtype: SafetensorsDtype, bytes: Uint8Array): Float32Array {
  // Copy first (a Buffer's slice would be a view): the tensor's offset need not be aligned for a typed array.
  const copy = new Uint8Array(bytes);
  if (dtype === 'F32') return new Float32Array(copy.buffer, 0, copy.length / 4);
  const halves = new Uint16Array(copy.buffer, 0, copy.length / 2);
  if (dtype === 'F16') return fromFloat16(halves);
  // bfloat16 is the upper half of a float32.
  const words = new Uint32Array(halves.length);
  for (let i = 0; i < halves.length; i += 1) words[i] = halves[i] << 16;
  return new Float32Array(words.buffer);
}

/** A tensor to write: float32 values stored as `dtype`. */
export interface TensorToWrite {
  dtype: SafetensorsDtype;
  shape: number[];
  data: ArrayLike<number>;
}

/**
 * Serialises tensors as a safetensors file (header padded with spaces to 8 bytes, as the
 * reference writer does). Used to write adapters and test files.
 */
export function encodeSafetensors(tensors: Record<string, TensorToWrite>, metadata: Record<string, string> = {}): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const bytes = encodeValues(t);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    chunks.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const head = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + head.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  let at = 8 + head.length;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

function encodeValues(t: TensorToWrite): Uint8Array {
  const f32 = Float32Array.from(t.data);
  if (t.dtype === 'F32') return new Uint8Array(f32.buffer);
  if (t.dtype === 'F16') return new Uint8Array(toFloat16(f32).buffer);
  const words = new Uint32Array(f32.buffer);
  const out = new Uint16Array(words.length);
  // Round to nearest even, as torch's bfloat16 conversion does.
  for (let i = 0; i < words.length; i += 1) out[i] = (words[i] + 0x7fff + ((words[i] >>> 16) & 1)) >>> 16;
  return new Uint8Array(out.buffer);
}
