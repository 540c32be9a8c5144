import { Code } from '@diffmesh/core';
import { describe, expect, it } from 'vitest';
import { ffmpegAvailable, ffprobeVideo } from './ffmpeg.js';
import { decodeImage, probeImage } from './image.js';
import { encodeResult, resultFormatFor } from './result.js';
import { probeVideo } from './video.js';
import { thrown } from '@diffmesh/testing';

const hasFfmpeg = (await ffmpegAvailable()) && (await ffmpegAvailable('ffprobe'));

function frames(count: number, width = 32, height = 16): Uint8Array[] {
  return Array.from({ length: count }, (_, i) => {
    const rgb = new Uint8Array(width * height * 3);
    for (let p = 0; p < width * height; p++) rgb.set([(i * 40) % 256, 200, (p % width) * 8], p * 3);
    return rgb;
  });
}

describe('result formats', () => {
  it('default to PNG for a picture and MP4 for a clip, and accept jpg for jpeg', () => {
    expect(resultFormatFor(1)).toBe('png');
    expect(resultFormatFor(8)).toBe('mp4');
    expect(resultFormatFor(1, 'JPG')).toBe('jpeg');
    expect(resultFormatFor(8, 'webm')).toBe('webm');
  });

  it('refuse an unknown format and a still format for a clip, naming the field', () => {
    expect(thrown(() => resultFormatFor(1, 'bmp'))).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'format' });
    const err = thrown(() => resultFormatFor(8, 'png'));
    expect(err.field).toBe('format');
    expect(err.message).toMatch(/8-frame video cannot be encoded as png/);
  });
});

describe('encodeResult', () => {
  it.each(['png', 'jpeg', 'webp'] as const)('encodes a picture as %s that decodes to its size', async (format) => {
    const out = await encodeResult({ width: 32, height: 16, frames: frames(1) }, format, { fps: 8 });
    expect(out.mediaType).toBe(format === 'jpeg' ? 'image/jpeg' : `image/${format}`);
    expect(await probeImage(out.bytes)).toMatchObject({ width: 32, height: 16 });
    const back = await decodeImage(out.bytes);
    expect(back.data.length).toBe(32 * 16 * 3);
  });

  it('encodes the PNG losslessly', async () => {
    const src = frames(1)[0];
    const out = await encodeResult({ width: 32, height: 16, frames: [src] }, 'png', { fps: 8 });
    expect(Buffer.from((await decodeImage(out.bytes)).data).equals(Buffer.from(src))).toBe(true);
  });

  it.runIf(hasFfmpeg)('encodes a clip as MP4 (H.264) and WebM (VP9) with every frame', async () => {
    for (const [format, codec] of [
      ['mp4', 'h264'],
      ['webm', 'vp9'],
    ] as const) {
      const out = await encodeResult({ width: 32, height: 16, frames: frames(6) }, format, { fps: 8 });
      expect(out.mediaType).toBe(`video/${format}`);
      expect(await probeVideo(out.bytes)).toEqual({ format, frames: 6, width: 32, height: 16 });
      expect((await ffprobeVideo(out.bytes)).codec).toBe(codec);
    }
  });

  it('encodes a clip as GIF without ffmpeg', async () => {
    const out = await encodeResult({ width: 32, height: 16, frames: frames(3) }, 'gif', { fps: 8 });
    expect(out.mediaType).toBe('image/gif');
    expect(Buffer.from(out.bytes.subarray(0, 6)).toString()).toBe('GIF89a');
  });
});
