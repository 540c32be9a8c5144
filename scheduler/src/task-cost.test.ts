import { describe, expect, it } from 'vitest';
import type { GenerationParams } from '@diffmesh/core';
import { MIN_SAMPLES, TaskCosts, nominalCost } from './task-cost.js';

const params = (p: Partial<GenerationParams> = {}): GenerationParams => ({
  prompt: 'x',
  negativePrompt: '',
  width: 512,
  height: 512,
  numFrames: 1,
  numInferenceSteps: 20,
  guidanceScale: 4.5,
  seed: '1',
  fps: 8,
  ...p,
});

describe('task costs', () => {
  it('costs pixels × frames × steps for denoising and pixels × frames for the other stages', () => {
    expect(nominalCost('denoising', params())).toBe(512 * 512 * 20);
    expect(nominalCost('vae_decoding', params({ numFrames: 9 }))).toBe(512 * 512 * 9);
    expect(nominalCost('text_encoding', params({ width: 256, height: 128 }))).toBe(256 * 128);
  });

  it("corrects a model's cost by its measured speed against the pool's once it has been seen", () => {
    const costs = new TaskCosts();
    const p = params();
    const nominal = nominalCost('denoising', p);
    for (let i = 0; i < MIN_SAMPLES - 1; i += 1) costs.observe('dit', 'slow', 'denoising', p, 2000);
    expect(costs.estimate('dit', 'slow', 'denoising', p)).toBe(nominal);
    for (let i = 0; i < 20; i += 1) {
      costs.observe('dit', 'slow', 'denoising', p, 2000);
      costs.observe('dit', 'fast', 'denoising', p, 1000);
    }
    // Same nominal cost, twice the run time: twice the cost.
    const slow = costs.estimate('dit', 'slow', 'denoising', p);
    const fast = costs.estimate('dit', 'fast', 'denoising', p);
    expect(slow / fast).toBeGreaterThan(1.8);
    expect(slow / fast).toBeLessThan(2.2);
    // A model not seen yet keeps its nominal cost; another pool knows nothing of these.
    expect(costs.estimate('dit', 'new', 'denoising', p)).toBe(nominal);
    expect(costs.estimate('other', 'slow', 'denoising', p)).toBe(nominal);
  });
});
