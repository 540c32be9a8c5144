import { describe, expect, it } from 'vitest';
import { decodePng, encodePng } from './png.js';
import { encodeVideo, probeVideo } from './video.js';

function pattern(width: number, height: number, seed: number): Uint8Array {
  const rgb = new Uint8Array(width * height * 3);
  let s = seed;
  for (let i = 0; i < rgb.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    rgb[i] = (i % 3 === 0 ? (i / 3) % width : s >>> 24) & 0xff;
  }
  return rgb;
}

function chunkTypes(png: Uint8Array): string[] {
  const types: string[] = [];
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  for (let pos = 8; pos + 8 <= png.length; pos += 12 + view.getUint32(pos)) {
    types.push(String.fromCharCode(...png.subarray(pos + 4, pos + 8)));
  }
  return types;
}

describe('PNG', () => {
  it('round-trips RGB pixels exactly (odd size)', () => {
    const rgb = pattern(37, 23, 1);
    const png = encodePng(rgb, 37, 23);
    const back = decodePng(png);
    expect(back.width).toBe(37);
    expect(back.height).toBe(23);
    expect(Buffer.from(back.rgb).equals(Buffer.from(rgb))).toBe(true);
  });

  it('writes the same bytes for the same pixels, with no timestamp or text chunks', () => {
    const a = encodePng(pattern(64, 64, 7), 64, 64);
    const b = encodePng(pattern(64, 64, 7), 64, 64);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
    expect(chunkTypes(a)).toEqual(['IHDR', 'IDAT', 'IEND']);
  });

  it('accepts a frame that is a view into a larger buffer', () => {
    const rgb = pattern(8, 8, 3);
    const backing = new Uint8Array(rgb.length + 10);
    backing.set(rgb, 5);
    const view = backing.subarray(5, 5 + rgb.length);
    expect(Buffer.from(encodePng(view, 8, 8)).equals(Buffer.from(encodePng(rgb, 8, 8)))).toBe(true);
  });

  it('rejects a frame of the wrong size and bytes that are not a PNG', () => {
    expect(() => encodePng(new Uint8Array(10), 2, 2)).toThrow(/needs 12/);
    expect(() => decodePng(new Uint8Array([1, 2, 3, 4]))).toThrow(/not a readable PNG/);
  });

  it('writes an animated PNG whose first frame any PNG reader sees', async () => {
    const frames = [0, 1, 2, 3].map((i) => pattern(20, 10, i + 10));
    const apng = await encodeVideo(frames, { width: 20, height: 10, fps: 8, format: 'apng' });
    expect(apng.mimeType).toBe('image/apng');
    expect(await probeVideo(apng.bytes)).toEqual({ format: 'apng', frames: 4, width: 20, height: 10 });
    const types = chunkTypes(apng.bytes);
    expect(types.filter((t) => t === 'fcTL')).toHaveLength(4);
    expect(types.filter((t) => t === 'fdAT')).toHaveLength(3);
    expect(Buffer.from(decodePng(apng.bytes).rgb).equals(Buffer.from(frames[0]))).toBe(true);
  });
});
