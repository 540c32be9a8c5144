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

/** Frame i with many colours (smooth hue waves that drift): the palette must be quantised. */
function colourfulFrame(i: number): Uint8Array {
  const rgb = new Uint8Array(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const o = (y * W + x) * 3;
      rgb[o] = Math.round(128 + 100 * Math.sin(x / 9 + y / 13 + i / 2));
      rgb[o + 1] = Math.round((y / (H - 1)) * 255);
      rgb[o + 2] = Math.round(128 + 120 * Math.cos((x - y + i * 3) / 7));
    }
  }
  return rgb;
}

function decodeAll(bytes: Uint8Array): { reader: GifReader; frames: Uint8Array[] } {
  const reader = new GifReader(bytes);
  const frames: Uint8Array[] = [];
  for (let f = 0; f < reader.numFrames(); f++) {
    const rgba = new Uint8Array(reader.width * reader.height * 4);
    reader.decodeAndBlitFrameRGBA(f, rgba);
    frames.push(rgba);
  }
  return { reader, frames };
}

/** Mean and max absolute channel error of decoded RGBA against source RGB. */
function channelError(rgba: Uint8Array, rgb: Uint8Array): { mean: number; max: number } {
  let max = 0;
  let sum = 0;
  for (let p = 0; p < rgb.length / 3; p++) {
    for (let c = 0; c < 3; c++) {
      const err = Math.abs(rgba[p * 4 + c] - rgb[p * 3 + c]);
      max = Math.max(max, err);
      sum += err;
    }
  }
  return { mean: sum / rgb.length, max };
}

describe('GIF', () => {
  it('encodes 8 frames that a GIF decoder reads back as 8 looping frames; few colours stay exact', async () => {
    const frames = Array.from({ length: 8 }, (_, i) => frame(i));
    const gif = await encodeVideo(frames, { width: W, height: H, fps: 8, format: 'gif' });
    expect(gif.mimeType).toBe('image/gif');

    const { reader, frames: decoded } = decodeAll(gif.bytes);
    expect(reader.width).toBe(W);
    expect(reader.height).toBe(H);
    expect(decoded).toHaveLength(8);
    expect(reader.loopCount()).toBe(0); // 0 = loop forever
    expect(countGifFrames(gif.bytes)).toBe(8);
    expect(await probeVideo(gif.bytes)).toEqual({ format: 'gif', frames: 8, width: W, height: H });
    for (let f = 0; f < 8; f++) {
      expect(reader.frameInfo(f).delay).toBe(f % 2 === 0 ? 13 : 12); // 12.5 cs per frame at 8 fps
      // 65 colours per frame fit a palette as they are.
      expect(channelError(decoded[f], frames[f]), `frame ${f}`).toEqual({ mean: 0, max: 0 });
    }
  });

  it('quantises many-coloured frames to about the right colours', async () => {
    const frames = Array.from({ length: 8 }, (_, i) => colourfulFrame(i));
    const gif = await encodeGif(frames, W, H, 12);
    const { frames: decoded } = decodeAll(gif);
    expect(decoded).toHaveLength(8);
    for (let f = 0; f < 8; f++) {
      // These frames fill the colour cube; 256 colours spaced over it are ~40 levels apart,
      // so the best palette (k-means) leaves a mean error near 7. Nothing may be far off.
      const err = channelError(decoded[f], frames[f]);
      expect(err.mean, `frame ${f}`).toBeLessThan(9);
      expect(err.max, `frame ${f}`).toBeLessThan(40);
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
