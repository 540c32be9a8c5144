import { Code } from '@diffmesh/core';
import { describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { decodeImage, encodeImage, probeImage, verifyImage, type RgbImage } from './image.js';
import { encodePng } from './png.js';
import { rejection } from '@diffmesh/testing';

/** A 16×8 picture: left half red, right half blue. */
function halves(width = 16, height = 8): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      const i = (y * width + x) * 3;
      if (x < width / 2) data[i] = 255;
      else data[i + 2] = 255;
    }
  }
  return { width, height, data };
}

describe('input images', () => {
  it('reads the format and size of PNG, JPEG and WebP', async () => {
    const img = halves();
    for (const [format, type] of [
      ['png', 'image/png'],
      ['jpeg', 'image/jpeg'],
      ['webp', 'image/webp'],
    ] as const) {
      expect(await probeImage(await encodeImage(img, format))).toEqual({ mediaType: type, width: 16, height: 8 });
    }
  });

  it('decodes a PNG to the exact pixels it holds', async () => {
    const img = halves();
    const decoded = await decodeImage(encodePng(img.data, img.width, img.height));
    expect(decoded.width).toBe(16);
    expect(decoded.height).toBe(8);
    expect(Buffer.from(decoded.data).equals(Buffer.from(img.data))).toBe(true);
  });

  it('resizes to the requested size, covering and centre-cropping', async () => {
    const png = await encodeImage(halves(32, 8), 'png');
    const out = await decodeImage(png, { width: 8, height: 8 });
    expect(out.data.length).toBe(8 * 8 * 3);
    // The 32×8 image is scaled to 32×8 (already covers) and its middle 8 columns kept: red then blue.
    expect([...out.data.subarray(0, 3)]).toEqual([255, 0, 0]);
    expect([...out.data.subarray(7 * 3, 8 * 3)]).toEqual([0, 0, 255]);
  });

  it('drops alpha and applies EXIF orientation', async () => {
    const rgba = await sharp(Buffer.alloc(4 * 2 * 4, 255), { raw: { width: 4, height: 2, channels: 4 } })
      .png()
      .withMetadata({ orientation: 6 })
      .toBuffer();
    const out = await decodeImage(rgba);
    expect([out.width, out.height]).toEqual([2, 4]);
    expect(out.data.length).toBe(2 * 4 * 3);
  });

  it('refuses corrupt, empty, truncated and foreign data naming the field', async () => {
    const png = await encodeImage(halves(), 'png');
    for (const bad of [new Uint8Array(0), Buffer.from('not an image at all'), png.subarray(0, png.length >> 1), Buffer.from('<svg/>')]) {
      const err = await rejection(decodeImage(bad, undefined, 'image'));
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.field).toBe('image');
    }
  });

  it('verifies that an image is whole: a cut that keeps the header passes the probe, not the verification', async () => {
    // Noise does not compress: the pixel data spans most of the file.
    const noise = new Uint8Array(64 * 64 * 3).map((_, i) => (Math.imul(i + 1, 2654435761) >>> 13) & 255);
    for (const format of ['png', 'jpeg', 'webp'] as const) {
      const whole = await encodeImage({ width: 64, height: 64, data: noise }, format);
      expect(await verifyImage(whole)).toEqual(await probeImage(whole));
      const cut = whole.subarray(0, Math.floor(whole.length * 0.6));
      if (format !== 'webp') expect((await probeImage(cut)).width, format).toBe(64); // the header is all there
      const err = await rejection(verifyImage(cut, 'image'));
      expect(err.field, format).toBe('image');
      expect(err.message, format).toMatch(/^image: (is truncated or corrupt|is not a readable)/);
    }
  });

  it('refuses an image over the size limits', async () => {
    const huge = await sharp({ create: { width: 9000, height: 9000, channels: 3, background: '#000' } })
      .png({ compressionLevel: 9 })
      .toBuffer();
    const err = await rejection(probeImage(huge));
    expect(err.field).toBe('input_image');
    expect(err.message).toMatch(/pixels/);
  });

  it('encodes JPEG and WebP that decode back close to the original', async () => {
    const img = halves(64, 32);
    for (const format of ['jpeg', 'webp'] as const) {
      const back = await decodeImage(await encodeImage(img, format, { quality: 95 }));
      let diff = 0;
      for (let i = 0; i < img.data.length; i += 1) diff += Math.abs(back.data[i] - img.data[i]);
      expect(diff / img.data.length).toBeLessThan(8);
    }
  });
});
