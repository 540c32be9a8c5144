import { PNG, type PackerOptions } from 'pngjs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Code, DiffmeshError, cancelled } from '@diffmesh/core';
import { checkFrames } from './frames.js';

/** A decoded image as packed 8-bit RGB. */
export interface DecodedPng {
  width: number;
  height: number;
  rgb: Uint8Array;
}

// Every option pinned so the bytes depend only on the pixels (and the zlib in use); pngjs
// writes no tIME or text chunks.
const PACK_OPTIONS: PackerOptions = {
  colorType: 2,
  inputColorType: 2,
  inputHasAlpha: false,
  bitDepth: 8,
  deflateLevel: 9,
  deflateStrategy: 3,
  filterType: -1,
};

const PNG_SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);

/** Encodes one packed RGB frame as an 8-bit RGB PNG. Same input, same bytes. */
export function encodePng(frame: Uint8Array, width: number, height: number): Uint8Array {
  checkFrames([frame], width, height);
  // The sync writer reads only width, height and data from its first argument; building a
  // PNG instance would allocate an unused RGBA buffer.
  const meta = { width, height, data: Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength) };
  const out = PNG.sync.write(meta as unknown as PNG, { ...PACK_OPTIONS });
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Decodes a PNG of any colour type or bit depth to 8-bit RGB. Alpha is dropped, not
 * composited. For an animated PNG this is the default image (its first frame).
 */
export function decodePng(bytes: Uint8Array): DecodedPng {
  let png: PNG;
  try {
    png = PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch (err) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `not a readable PNG: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const { width, height, data } = png;
  const rgb = new Uint8Array(width * height * 3);
  for (let i = 0, o = 0; o < rgb.length; i += 4, o += 3) {
    rgb[o] = data[i]!;
    rgb[o + 1] = data[i + 1]!;
    rgb[o + 2] = data[i + 2]!;
  }
  return { width, height, rgb };
}

/**
 * Encodes frames as an animated PNG (lossless, loops forever). Viewers without APNG
 * support show the first frame. Yields to the event loop between frames and stops with a
 * CANCELLED error when `signal` aborts.
 */
export async function encodeApng(
  frames: readonly Uint8Array[],
  width: number,
  height: number,
  fps: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  checkFrames(frames, width, height);
  checkFps(fps);
  const [delayNum, delayDen] = apngDelay(fps);
  const parts: Uint8Array[] = [PNG_SIGNATURE];
  let seq = 0;
  for (let i = 0; i < frames.length; i++) {
    if (signal?.aborted) throw cancelled('APNG encoding cancelled');
    if (i > 0) await nextTurn();
    const chunks = readChunks(encodePng(frames[i], width, height));
    if (i === 0) {
      parts.push(chunk('IHDR', chunks.find((c) => c.type === 'IHDR')!.data));
      const actl = new DataView(new ArrayBuffer(8));
      actl.setUint32(0, frames.length);
      actl.setUint32(4, 0); // plays: 0 = forever
      parts.push(chunk('acTL', new Uint8Array(actl.buffer)));
    }
    const fctl = new DataView(new ArrayBuffer(26));
    fctl.setUint32(0, seq++);
    fctl.setUint32(4, width);
    fctl.setUint32(8, height);
    // x/y offsets stay 0: every frame covers the whole canvas.
    fctl.setUint16(20, delayNum);
    fctl.setUint16(22, delayDen);
    fctl.setUint8(24, 0); // dispose: none
    fctl.setUint8(25, 0); // blend: source
    parts.push(chunk('fcTL', new Uint8Array(fctl.buffer)));
    for (const c of chunks) {
      if (c.type !== 'IDAT') continue;
      if (i === 0) {
        parts.push(chunk('IDAT', c.data));
      } else {
        const fdat = new Uint8Array(4 + c.data.length);
        new DataView(fdat.buffer).setUint32(0, seq++);
        fdat.set(c.data, 4);
        parts.push(chunk('fdAT', fdat));
      }
    }
  }
  if (signal?.aborted) throw cancelled('APNG encoding cancelled');
  parts.push(chunk('IEND', new Uint8Array(0)));
  return concat(parts);
}

/** Width, height and frame count of a PNG or APNG, read from its chunks. */
export function pngInfo(bytes: Uint8Array): { animated: boolean; frames: number; width: number; height: number } {
  if (!isPng(bytes)) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'not a PNG file');
  }
  const chunks = readChunks(bytes);
  const ihdr = chunks.find((c) => c.type === 'IHDR');
  if (!ihdr || ihdr.data.length < 8) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'PNG has no IHDR chunk');
  }
  const view = new DataView(ihdr.data.buffer, ihdr.data.byteOffset, ihdr.data.byteLength);
  const actl = chunks.find((c) => c.type === 'acTL');
  const frames = actl && actl.data.length >= 4 ? new DataView(actl.data.buffer, actl.data.byteOffset, 4).getUint32(0) : 1;
  return { animated: actl !== undefined, frames, width: view.getUint32(0), height: view.getUint32(4) };
}

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && PNG_SIGNATURE.every((b, i) => bytes[i] === b);
}

/** Throws unless fps is a positive finite number. */
export function checkFps(fps: number): void {
  if (!Number.isFinite(fps) || fps <= 0) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `fps: must be a positive number, got ${fps}`, {
      metadata: { field: 'fps' },
    });
  }
}

/** Frame delay as the 16-bit fraction APNG stores, in seconds. */
function apngDelay(fps: number): [number, number] {
  if (Number.isInteger(fps) && fps <= 0xffff) return [1, fps];
  if (fps * 1000 <= 0xffff) return [1000, Math.round(fps * 1000)];
  return [1, Math.min(0xffff, Math.round(fps))];
}

interface Chunk {
  type: string;
  data: Uint8Array;
}

function readChunks(bytes: Uint8Array): Chunk[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const chunks: Chunk[] = [];
  let pos = 8;
  while (pos + 12 <= bytes.length) {
    const length = view.getUint32(pos);
    const type = String.fromCharCode(bytes[pos + 4], bytes[pos + 5], bytes[pos + 6], bytes[pos + 7]);
    if (pos + 12 + length > bytes.length) break; // truncated file: keep what is whole
    chunks.push({ type, data: bytes.subarray(pos + 8, pos + 8 + length) });
    pos += 12 + length;
    if (type === 'IEND') break;
  }
  return chunks;
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(data, 8);
  view.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

// zlib.crc32 arrived after Node 20.12, which diffmesh still supports.
const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let pos = 0;
  for (const p of parts) {
    out.set(p, pos);
    pos += p.length;
  }
  return out;
}
