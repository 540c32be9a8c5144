import { describe, expect, it } from 'vitest';
import { flux, latentImageIds, packLatents, unpackLatents } from './flux.js';
import { sd } from './sd.js';

// FluxPipeline._pack_latents: view(C, h/2, 2, w/2, 2) → permute(h/2, w/2, C, 2, 2) → (h/2·w/2, 4C).
describe('FLUX latent packing', () => {
  const C = 2;
  const h = 4;
  const w = 6;
  const latent = Float32Array.from({ length: C * h * w }, (_, k) => k);

  it('puts channel k of pixel (2r + dy, 2c + dx) at 4k + 2dy + dx of token (r, c)', () => {
    const packed = packLatents(latent, C, h, w);
    const at = (k: number, y: number, x: number) => (k * h + y) * w + x;
    // Token (1, 2) = row 1 of 2, column 2 of 3: pixels (2..3, 4..5).
    const token = (1 * (w / 2) + 2) * 4 * C;
    expect(Array.from(packed.subarray(token, token + 4 * C))).toEqual([
      at(0, 2, 4),
      at(0, 2, 5),
      at(0, 3, 4),
      at(0, 3, 5),
      at(1, 2, 4),
      at(1, 2, 5),
      at(1, 3, 4),
      at(1, 3, 5),
    ]);
  });

  it('unpacks what it packed, and the family works in tokens of 4·C values with σ as timestep', () => {
    const size = { channels: C, height: h, width: w };
    expect(unpackLatents(packLatents(latent, C, h, w), C, h, w)).toEqual(latent);
    expect(flux.unpack(flux.pack(latent, size), size)).toEqual(latent);
    expect(flux.sampleDims(size)).toEqual([(h / 2) * (w / 2), 4 * C]);
    expect(flux.timestep(750)).toBe(0.75);
    // The UNet families take the latent as it is, and give back a copy.
    expect(sd.pack(latent, size)).toBe(latent);
    expect(sd.unpack(latent, size)).not.toBe(latent);
    expect(sd.sampleDims(size)).toEqual([C, h, w]);
  });

  it('gives img_ids (0, row, col) per token', () => {
    expect(Array.from(latentImageIds(4, 4))).toEqual([0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1]);
  });
});
