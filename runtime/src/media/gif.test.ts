import { GifReader } from 'omggif';
import { describe, expect, it } from 'vitest';
import { countGifFrames, encodeGif, gifDelays } from './gif.js';
import { encodeVideo, probeVideo } from './video.js';

const W = 64;
const H = 48;

/** Frame i: a horizontal grey ramp with a coloured square that moves and changes hue. */
function frame(i: number): Uint8Array {
  const rgb = new Uint8Array(W * H * 3);
  const colour = [(i * 97) % 256, (255 - i * 31) % 256, (i * 53 + 40) % 256];
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const o = (y * W + x) * 3;
      const inSquare = x >= i * 4 && x < i * 4 + 16 && y >= 8 && y < 24;
      if (inSquare) rgb.set(colour, o);
      else rgb.fill(Math.round((x / (W - 1)) * 255), o, o + 3);
    }
  }
  return rgb;
}

describe('GIF', () => {
  it('encodes 8 frames that a GIF decoder reads back as 8 frames of about the same colours', async () => {
    const frames = Array.from({ length: 8 }, (_, i) => frame(i));
    const gif = await encodeVideo(frames, { width: W, height: H, fps: 8, format: 'gif' });
    expect(gif.mimeType).toBe('image/gif');

    const reader = new GifReader(gif.bytes);
    expect(reader.width).toBe(W);
    expect(reader.height).toBe(H);
    expect(reader.numFrames()).toBe(8);
    expect(reader.loopCount()).toBe(0); // 0 = loop forever
    expect(countGifFrames(gif.bytes)).toBe(8);
    expect(await probeVideo(gif.bytes)).toEqual({ format: 'gif', frames: 8, width: W, height: H });

    const rgba = new Uint8Array(W * H * 4);
    for (let f = 0; f < 8; f++) {
      expect(reader.frameInfo(f).delay).toBe(f % 2 === 0 ? 13 : 12); // 12.5 cs per frame at 8 fps
      reader.decodeAndBlitFrameRGBA(f, rgba);
      let maxErr = 0;
      let sumErr = 0;
      for (let p = 0; p < W * H; p++) {
        for (let c = 0; c < 3; c++) {
          const err = Math.abs(rgba[p * 4 + c]! - frames[f]![p * 3 + c]!);
          maxErr = Math.max(maxErr, err);
          sumErr += err;
        }
      }
      // A per-frame 256-colour palette from RGB565 bins: small errors, never a wrong colour.
      expect(maxErr, `frame ${f}`).toBeLessThanOrEqual(8);
      expect(sumErr / (W * H * 3), `frame ${f}`).toBeLessThan(3);
    }
  });

  it('spreads centisecond rounding so a clip lasts as long as its frame count says', () => {
    const at24 = gifDelays(24, 24);
    expect(at24.reduce((a, b) => a + b, 0)).toBe(100);
    expect(new Set(at24)).toEqual(new Set([4, 5]));
    expect(gifDelays(3, 10)).toEqual([10, 10, 10]);
    // Browsers treat delays under 2 cs as 10 cs, so faster clips are capped at 50 fps.
    expect(gifDelays(4, 120)).toEqual([2, 2, 2, 2]);
    expect(() => gifDelays(4, 0)).toThrow(/fps/);
  });

  it('stops with CANCELLED when the signal is aborted', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(encodeGif([frame(0), frame(1)], W, H, 8, ac.signal)).rejects.toMatchObject({ reason: 'CANCELLED' });
  });

  it('rejects bytes that are not a whole GIF', async () => {
    const frames = [frame(0), frame(1)];
    const gif = await encodeGif(frames, W, H, 8);
    expect(() => countGifFrames(gif.subarray(0, gif.length - 40))).toThrow(/not a readable GIF/);
    expect(() => countGifFrames(new Uint8Array([1, 2, 3]))).toThrow(/not a readable GIF/);
  });
});
