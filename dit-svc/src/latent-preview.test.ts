import { describe, expect, it } from 'vitest';
import { decodePng } from '@diffmesh/media';
import { familyProjection, latentPreview, LoopPreviews, manifestProjection, previewDue } from './latent-preview.js';

const IDENTITY = manifestProjection(
  {
    rgbFactors: [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ],
  },
  3,
);

/** A [C, h, w] latent whose channel c holds f(c, y, x). */
function latent(C: number, h: number, w: number, f: (c: number, y: number, x: number) => number): Float32Array {
  const out = new Float32Array(C * h * w);
  for (let c = 0; c < C; c += 1) for (let y = 0; y < h; y += 1) for (let x = 0; x < w; x += 1) out[(c * h + y) * w + x] = f(c, y, x);
  return out;
}

describe('previewDue', () => {
  it('is every N steps and the last, and never without preview params', () => {
    const due = (every: number, total: number) =>
      Array.from({ length: total }, (_, i) => i + 1).filter((s) => previewDue({ everySteps: every }, s, total));
    expect(due(2, 7)).toEqual([2, 4, 6, 7]);
    expect(due(1, 3)).toEqual([1, 2, 3]);
    expect(due(10, 4)).toEqual([4]);
    expect(previewDue(undefined, 4, 4)).toBe(false);
    expect(previewDue({ everySteps: 0 }, 4, 4)).toBe(false);
  });
});

describe('latentPreview', () => {
  it('maps a latent that is the picture ([-1, 1]) to its colours at the latent size', () => {
    // Left half red, right half blue.
    const x = latent(3, 4, 6, (c, _y, col) => (col < 3 ? [1, -1, -1][c] : [-1, -1, 1][c]));
    const p = latentPreview(x, { channels: 3, height: 4, width: 6, planeStride: 24 }, IDENTITY, 256);
    expect(p).toMatchObject({ mediaType: 'image/png', width: 6, height: 4 });
    const png = decodePng(p.data);
    expect(Array.from(png.rgb.subarray(0, 3))).toEqual([255, 0, 0]);
    expect(Array.from(png.rgb.subarray(5 * 3, 6 * 3))).toEqual([0, 0, 255]);
  });

  it('applies a family’s factors and bias (SDXL: 4 channels)', () => {
    const proj = familyProjection('sdxl', 4);
    expect(proj.kind).toBe('linear');
    // Channel 0 only, at 1: RGB = factors[0] + bias = (0.3651 + 0.1084, 0.4232 − 0.0175, 0.4341 − 0.0011).
    const x = latent(4, 1, 1, (c) => (c === 0 ? 1 : 0));
    const png = decodePng(latentPreview(x, { channels: 4, height: 1, width: 1, planeStride: 1 }, proj, 8).data);
    const byte = (v: number) => Math.round(((v + 1) / 2) * 255);
    expect(Array.from(png.rgb)).toEqual([byte(0.4735), byte(0.4057), byte(0.433)]);
  });

  it('falls back to the first three channels, normalised, when the channel count matches no factors', () => {
    expect(familyProjection('sd', 16)).toEqual({ kind: 'normalised' });
    expect(manifestProjection(undefined, 4)).toEqual({ kind: 'normalised' });
    // A ramp along x in channel 0 (tiny values: normalisation makes them visible).
    const x = latent(8, 2, 8, (c, _y, col) => (c === 0 ? col * 1e-3 : 0));
    const png = decodePng(latentPreview(x, { channels: 8, height: 2, width: 8, planeStride: 16 }, { kind: 'normalised' }, 64).data);
    const reds = Array.from({ length: 8 }, (_, col) => png.rgb[col * 3]);
    expect(reds).toEqual([...reds].sort((a, b) => a - b));
    expect(reds[7] - reds[0]).toBeGreaterThan(150);
    // Constant channels come out mid-grey, not black.
    expect(png.rgb[1]).toBe(128);
  });

  it('samples a large latent down to max_side, keeping its aspect, and reads frame 0 of a video latent', () => {
    // [C=3, F=2, h=64, w=128]: frame 0 red, frame 1 green.
    const C = 3;
    const F = 2;
    const h = 64;
    const w = 128;
    const x = new Float32Array(C * F * h * w).fill(-1);
    for (let k = 0; k < h * w; k += 1) {
      x[(0 * F + 0) * h * w + k] = 1; // R of frame 0
      x[(1 * F + 1) * h * w + k] = 1; // G of frame 1
    }
    const p = latentPreview(x, { channels: C, height: h, width: w, planeStride: F * h * w }, IDENTITY, 32);
    expect([p.width, p.height]).toEqual([32, 16]);
    const png = decodePng(p.data);
    expect(Array.from(png.rgb.subarray(0, 3))).toEqual([255, 0, 0]);
  });
});

describe('LoopPreviews', () => {
  const frame = (v: number) => () => ({ data: new Float32Array(3 * 2 * 2).fill(v), channels: 3, height: 2, width: 2 });

  it('draws a due step while the next runs and hands it over with that step; the last step’s at once', async () => {
    const loop = new LoopPreviews({ everySteps: 2, maxSide: 256 }, IDENTITY);
    const got: number[][] = [];
    for (let s = 1; s <= 7; s += 1) got.push((await loop.after(s, 7, frame(s / 7))).map((p) => p.step));
    expect(got).toEqual([[], [], [2], [], [4], [], [6, 7]]);
  });

  it('copies the frame at its step: a latent changed afterwards does not change the preview', async () => {
    const loop = new LoopPreviews({ everySteps: 1, maxSide: 256 }, IDENTITY);
    const x = new Float32Array(3 * 2 * 2).fill(1);
    await loop.after(1, 2, () => ({ data: x.slice(), channels: 3, height: 2, width: 2 }));
    x.fill(-1);
    const [first, last] = await loop.after(2, 2, () => ({ data: x.slice(), channels: 3, height: 2, width: 2 }));
    expect(Array.from(decodePng(first.data).rgb.subarray(0, 3))).toEqual([255, 255, 255]);
    expect(Array.from(decodePng(last.data).rgb.subarray(0, 3))).toEqual([0, 0, 0]);
  });

  it('does nothing without preview params', async () => {
    const loop = new LoopPreviews(undefined, IDENTITY);
    let copied = 0;
    expect(await loop.after(1, 1, () => (copied++, frame(0)()))).toEqual([]);
    expect(copied).toBe(0);
  });
});
