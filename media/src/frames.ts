import { Code, DiffmeshError } from '@diffmesh/core';

/** A clip of packed 8-bit RGB frames (`width * height * 3` bytes each, rows top to bottom). */
export interface RgbFrames {
  width: number;
  height: number;
  frames: Uint8Array[];
}

function badInput(message: string): DiffmeshError {
  return new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', message);
}

/**
 * Converts VAE decoder output to RGB frames.
 *
 * `data` is a float32 tensor of shape `[B, 3, F, H, W]` with values in [-1, 1]; the result
 * holds the F frames of batch item `batchIndex`, in order. Each value maps to
 * `round((x + 1) * 127.5)` clamped to 0..255 (NaN maps to 0).
 */
export function tensorToFrames(data: Float32Array, shape: number[], batchIndex = 0): RgbFrames {
  if (shape.length !== 5) {
    throw badInput(`expected a [B, 3, F, H, W] tensor, got shape [${shape.join(', ')}]`);
  }
  const [batch, channels, numFrames, height, width] = shape as [number, number, number, number, number];
  if (!shape.every((d) => Number.isInteger(d) && d > 0)) {
    throw badInput(`tensor shape [${shape.join(', ')}] has a non-positive or non-integer dimension`);
  }
  if (channels !== 3) {
    throw badInput(`expected 3 colour channels in dimension 1, got ${channels}`);
  }
  const expected = batch * channels * numFrames * height * width;
  if (data.length !== expected) {
    throw badInput(`tensor of shape [${shape.join(', ')}] needs ${expected} values, got ${data.length}`);
  }
  if (!Number.isInteger(batchIndex) || batchIndex < 0 || batchIndex >= batch) {
    throw badInput(`batch index ${batchIndex} is out of range for batch size ${batch}`);
  }

  const plane = height * width;
  const frames: Uint8Array[] = [];
  for (let f = 0; f < numFrames; f++) {
    const rgb = new Uint8Array(plane * 3);
    for (let c = 0; c < 3; c++) {
      const base = ((batchIndex * 3 + c) * numFrames + f) * plane;
      for (let p = 0, o = c; p < plane; p++, o += 3) {
        const v = (data[base + p] + 1) * 127.5;
        // Written so that NaN falls through to 0.
        rgb[o] = v >= 255 ? 255 : v > 0 ? Math.round(v) : 0;
      }
    }
    frames.push(rgb);
  }
  return { width, height, frames };
}

/** Throws unless every frame is packed RGB of the given size. */
export function checkFrames(frames: readonly Uint8Array[], width: number, height: number): void {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width <= 0 || height <= 0) {
    throw badInput(`frame size must be positive integers, got ${width}x${height}`);
  }
  if (frames.length === 0) throw badInput('no frames to encode');
  const size = width * height * 3;
  frames.forEach((frame, i) => {
    if (frame.length !== size) {
      throw badInput(`frame ${i} has ${frame.length} bytes; ${width}x${height} RGB needs ${size}`);
    }
  });
}

/** Packed RGB → RGBA with opaque alpha, in a fresh buffer that starts at offset 0. */
export function rgbToRgba(rgb: Uint8Array, out = new Uint8Array((rgb.length / 3) * 4)): Uint8Array {
  for (let i = 0, o = 0; i < rgb.length; i += 3, o += 4) {
    out[o] = rgb[i]!;
    out[o + 1] = rgb[i + 1]!;
    out[o + 2] = rgb[i + 2]!;
    out[o + 3] = 255;
  }
  return out;
}
