import { describe, expect, it } from 'vitest';
import { tensorToFrames } from './frames.js';

describe('tensorToFrames', () => {
  it('maps [-1, 1] to 0..255, rounding and clamping (NaN → 0)', () => {
    const values = [-2, -1, -0.999, 0, 0.5, 1, 2, Number.NaN, -0.996, 0.996, 0.003, -0.003];
    // One frame, 1 x 4 pixels, 3 channels: fill the 12 values channel-plane by channel-plane.
    const { frames } = tensorToFrames(Float32Array.from(values), [1, 3, 1, 1, 4]);
    const planes = [0, 1, 2].map((c) => [0, 1, 2, 3].map((x) => frames[0][x * 3 + c]));
    // round((x + 1) * 127.5) on float32 inputs, e.g. 0 → 127.5 → 128, 0.5 → 191.25 → 191.
    expect(planes).toEqual([
      [0, 0, 0, 128],
      [191, 255, 255, 0],
      [1, 254, 128, 127],
    ]);
  });

  it('returns the frames of the chosen batch item in order, pixels packed RGB', () => {
    const [B, C, F, H, W] = [2, 3, 3, 2, 2];
    // Encode (b, c, f, y, x) in the byte each element should become.
    const byteFor = (b: number, c: number, f: number, y: number, x: number) => b * 100 + f * 20 + c * 5 + y * 2 + x;
    const data = new Float32Array(B * C * F * H * W);
    let i = 0;
    for (let b = 0; b < B; b++)
      for (let c = 0; c < C; c++)
        for (let f = 0; f < F; f++) for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) data[i++] = byteFor(b, c, f, y, x) / 127.5 - 1;

    for (const b of [0, 1]) {
      const out = tensorToFrames(data, [B, C, F, H, W], b);
      expect(out.width).toBe(W);
      expect(out.height).toBe(H);
      expect(out.frames).toHaveLength(F);
      for (let f = 0; f < F; f++) {
        const expected: number[] = [];
        for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) for (let c = 0; c < C; c++) expected.push(byteFor(b, c, f, y, x));
        expect(Array.from(out.frames[f])).toEqual(expected);
      }
    }
  });

  it('rejects tensors it cannot read as [B, 3, F, H, W]', () => {
    expect(() => tensorToFrames(new Float32Array(12), [1, 3, 2, 2])).toThrow(/\[B, 3, F, H, W\]/);
    expect(() => tensorToFrames(new Float32Array(16), [1, 4, 1, 2, 2])).toThrow(/3 colour channels/);
    expect(() => tensorToFrames(new Float32Array(11), [1, 3, 1, 2, 2])).toThrow(/needs 12 values, got 11/);
    expect(() => tensorToFrames(new Float32Array(12), [1, 3, 1, 2, 2], 1)).toThrow(/batch index 1/);
  });
});
