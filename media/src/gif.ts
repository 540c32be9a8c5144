import type { Gifenc } from 'gifenc';
import { createRequire } from 'node:module';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Code, DiffmeshError, cancelled } from '@diffmesh/core';
import { checkFps } from './png.js';
import { checkFrames, rgbToRgba } from './frames.js';

// gifenc is CommonJS with an __esModule marker, so ESM loaders disagree on its default
// export (Node: module.exports; Vite: the GIFEncoder function). require() agrees everywhere.
const gifenc = createRequire(import.meta.url)('gifenc') as Gifenc;

/**
 * Per-frame GIF delays in centiseconds (the unit GIF stores) for `count` frames at `fps`.
 * Rounding is spread over the frames so the total duration stays within 10 ms of
 * `count / fps` (24 fps gives 4, 4, 5, 4, 4, 5, ...). Delays never drop below 2 cs, since
 * browsers show shorter delays as 10 cs; faster clips therefore play at 50 fps.
 */
export function gifDelays(count: number, fps: number): number[] {
  checkFps(fps);
  const delays: number[] = [];
  let prev = 0;
  for (let i = 1; i <= count; i++) {
    const end = Math.round((i * 100) / fps);
    delays.push(Math.max(2, end - prev));
    prev = end;
  }
  return delays;
}

// Above this many distinct RGB565 bins, gifenc's quantiser (pairwise nearest neighbour,
// super-linear in bins) takes seconds per frame: a colourful 832x480 frame takes ~10 s on
// RGB565 bins and ~0.15 s on RGB444 bins, with the same mean error.
const MAX_RGB565_BINS = 4096;

/**
 * A palette of at most 256 colours for one RGBA frame, and each pixel's index into it.
 * Frames with 256 colours or fewer keep them exactly.
 */
function framePalette(rgba: Uint8Array): { palette: number[][]; index: Uint8Array } {
  const pixels = new Uint32Array(rgba.buffer, rgba.byteOffset, rgba.length / 4);
  const exact = new Map<number, number>();
  const index = new Uint8Array(pixels.length);
  let i = 0;
  for (; i < pixels.length; i++) {
    const colour = pixels[i];
    let k = exact.get(colour);
    if (k === undefined) {
      if (exact.size === 256) break;
      k = exact.size;
      exact.set(colour, k);
    }
    index[i] = k;
  }
  if (i === pixels.length) {
    const palette = [...exact.keys()].map((c) => [c & 0xff, (c >>> 8) & 0xff, (c >>> 16) & 0xff]);
    return { palette, index };
  }
  const bins = new Uint8Array(65536);
  let binCount = 0;
  for (let p = 0; p < rgba.length && binCount <= MAX_RGB565_BINS; p += 4) {
    const bin = ((rgba[p] >> 3) << 11) | ((rgba[p + 1] >> 2) << 5) | (rgba[p + 2] >> 3);
    if (bins[bin] === 0) {
      bins[bin] = 1;
      binCount++;
    }
  }
  const palette = gifenc.quantize(rgba, 256, { format: binCount > MAX_RGB565_BINS ? 'rgb444' : 'rgb565' });
  // Mapping pixels to the palette keeps the finer RGB565 lookup either way.
  return { palette, index: gifenc.applyPalette(rgba, palette, 'rgb565') };
}

/**
 * Encodes packed RGB frames as an animated GIF that loops forever, with a 256-colour
 * palette quantised per frame (no dithering). Yields to the event loop between frames and stops with a
 * CANCELLED error when `signal` aborts.
 */
export async function encodeGif(
  frames: readonly Uint8Array[],
  width: number,
  height: number,
  fps: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  checkFrames(frames, width, height);
  if (width > 0xffff || height > 0xffff) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `GIF frames are at most 65535x65535, got ${width}x${height}`);
  }
  const delays = gifDelays(frames.length, fps);
  const gif = gifenc.GIFEncoder({ initialCapacity: width * height });
  // One RGBA scratch buffer, reused: gifenc wants RGBA that owns its ArrayBuffer.
  const rgba = new Uint8Array(width * height * 4);
  for (let i = 0; i < frames.length; i++) {
    if (signal?.aborted) throw cancelled('GIF encoding cancelled');
    rgbToRgba(frames[i], rgba);
    const { palette, index } = framePalette(rgba);
    gif.writeFrame(index, width, height, { palette, delay: delays[i] * 10, repeat: 0 });
    if (i + 1 < frames.length) await nextTurn();
  }
  if (signal?.aborted) throw cancelled('GIF encoding cancelled');
  gif.finish();
  return gif.bytes();
}

export function isGif(bytes: Uint8Array): boolean {
  return (
    bytes.length >= 6 &&
    bytes[0] === 0x47 &&
    bytes[1] === 0x49 &&
    bytes[2] === 0x46 && // "GIF"
    bytes[3] === 0x38 &&
    (bytes[4] === 0x37 || bytes[4] === 0x39) &&
    bytes[5] === 0x61 // "87a" | "89a"
  );
}

/** Canvas size and frame count of a GIF, found by walking its blocks (no pixel decoding). */
export function gifInfo(bytes: Uint8Array): { frames: number; width: number; height: number } {
  const bad = (why: string) => new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `not a readable GIF: ${why}`);
  if (!isGif(bytes) || bytes.length < 13) throw bad('bad signature');
  const u16 = (at: number) => bytes[at] | (bytes[at + 1] << 8);
  const width = u16(6);
  const height = u16(8);
  const flags = bytes[10];
  let pos = 13;
  if (flags & 0x80) pos += 3 << ((flags & 7) + 1); // global colour table
  const skipSubBlocks = () => {
    while (pos < bytes.length) {
      const size = bytes[pos++];
      if (size === 0) return;
      pos += size;
    }
    throw bad('truncated data');
  };
  let frames = 0;
  while (pos < bytes.length) {
    const introducer = bytes[pos++];
    if (introducer === 0x3b) return { frames, width, height }; // trailer
    if (introducer === 0x21) {
      pos++; // label
      skipSubBlocks();
    } else if (introducer === 0x2c) {
      if (pos + 9 > bytes.length) throw bad('truncated image descriptor');
      const imageFlags = bytes[pos + 8];
      pos += 9;
      if (imageFlags & 0x80) pos += 3 << ((imageFlags & 7) + 1); // local colour table
      pos++; // LZW minimum code size
      skipSubBlocks();
      frames++;
    } else {
      throw bad(`unexpected block 0x${introducer.toString(16)} at byte ${pos - 1}`);
    }
  }
  throw bad('missing trailer');
}

/** Number of frames (image descriptors) in a GIF. */
export function countGifFrames(bytes: Uint8Array): number {
  return gifInfo(bytes).frames;
}
