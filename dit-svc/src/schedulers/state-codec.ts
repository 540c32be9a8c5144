import { invalidUse } from './errors.js';
import type { SchedulerState } from './types.js';

const MAGIC = 0x5353_4d44; // "DMSS" little-endian

/**
 * A scheduler state as one byte array (for a checkpoint object in the tensor store): "DMSS",
 * the length of a UTF-8 JSON header, the header (everything but the buffer data, plus buffer
 * names and lengths), zero padding to a multiple of 4, then the buffers as little-endian
 * float32, in header order.
 */
export function encodeSchedulerState(state: SchedulerState): Uint8Array {
  const names = Object.keys(state.buffers);
  const header = JSON.stringify({
    version: state.version,
    className: state.className,
    fingerprint: state.fingerprint,
    nextStep: state.nextStep,
    noiseDrawn: state.noiseDrawn,
    values: state.values,
    buffers: names.map((name) => ({ name, length: state.buffers[name].length })),
  });
  const head = new TextEncoder().encode(header);
  const dataStart = align4(8 + head.length);
  const total = dataStart + names.reduce((n, k) => n + state.buffers[k].length * 4, 0);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, head.length, true);
  out.set(head, 8);
  let at = dataStart;
  for (const name of names) {
    for (const v of state.buffers[name]) {
      view.setFloat32(at, v, true);
      at += 4;
    }
  }
  return out;
}

/** The inverse of `encodeSchedulerState`. */
export function decodeSchedulerState(bytes: Uint8Array): SchedulerState {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < 8 || view.getUint32(0, true) !== MAGIC) throw invalidUse('not an encoded scheduler state');
  const headLen = view.getUint32(4, true);
  if (8 + headLen > bytes.byteLength) throw invalidUse('encoded scheduler state is truncated');
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headLen))) as Omit<SchedulerState, 'buffers'> & {
    buffers: { name: string; length: number }[];
  };
  let at = align4(8 + headLen);
  const buffers: Record<string, Float32Array> = {};
  for (const { name, length } of header.buffers) {
    if (at + length * 4 > bytes.byteLength) throw invalidUse('encoded scheduler state is truncated');
    const b = new Float32Array(length);
    for (let k = 0; k < length; k += 1) b[k] = view.getFloat32(at + k * 4, true);
    buffers[name] = b;
    at += length * 4;
  }
  return { ...header, buffers };
}

function align4(n: number): number {
  return (n + 3) & ~3;
}
