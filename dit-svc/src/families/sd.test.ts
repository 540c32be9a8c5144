import { describe, expect, it } from 'vitest';
import { guidanceScaleEmbedding } from './sd.js';

// diffusers' LatentConsistencyModelPipeline.get_guidance_scale_embedding(w, embedding_dim):
// w·1000 · exp(−k·ln(10000)/(half − 1)) for k < half = dim // 2, [sin ‖ cos], zero-padded when dim is odd.
describe('guidanceScaleEmbedding (LCM timestep_cond)', () => {
  it('gives [sin ‖ cos] of w·1000 at log-spaced frequencies 1 … 1/10000', () => {
    // dim 4: half 2, frequencies 1 and 10000^(−1) → arguments 1000·w and 0.1·w.
    const e = guidanceScaleEmbedding(1, 4);
    expect(e.length).toBe(4);
    expect(e[0]).toBeCloseTo(Math.sin(1000), 5);
    expect(e[1]).toBeCloseTo(Math.sin(0.1), 6);
    expect(e[2]).toBeCloseTo(Math.cos(1000), 5);
    expect(e[3]).toBeCloseTo(Math.cos(0.1), 6);
  });

  it('uses half − 1 in the frequency step and pads an odd dimension with one zero at the end', () => {
    // dim 7: half 3, step ln(10000)/2 → frequencies 1, 0.01, 0.0001; w = 7 − 1 = 6 → 6000, 60, 0.6.
    const e = guidanceScaleEmbedding(6, 7);
    const args = [6000, 60, 0.6];
    for (let k = 0; k < 3; k += 1) {
      expect(e[k]).toBeCloseTo(Math.sin(args[k]), 3);
      expect(e[3 + k]).toBeCloseTo(Math.cos(args[k]), 3);
    }
    expect(e[6]).toBe(0);
  });

  it('is sin 0 = 0 and cos 0 = 1 at guidance 1 (w = 0)', () => {
    expect(Array.from(guidanceScaleEmbedding(0, 6))).toEqual([0, 0, 0, 1, 1, 1]);
  });
});
