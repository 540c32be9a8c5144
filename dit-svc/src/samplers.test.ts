import { describe, expect, it } from 'vitest';
import { DdimSampler, FlowEulerSampler, alphasCumprod, applyGuidance } from './samplers.js';

const ddimCfg = { numTrainTimesteps: 1000, betaStart: 0.00085, betaEnd: 0.012, betaSchedule: 'scaled_linear' as const };

describe('FlowEulerSampler', () => {
  it('runs sigma from 1 to 0 with shift applied', () => {
    const s = new FlowEulerSampler(4, 3);
    expect(s.sigmas[0]).toBe(1);
    expect(s.sigmas[4]).toBe(0);
    // shift 3 at sigma 0.5: 1.5 / 2 = 0.75
    expect(s.sigmas[2]).toBeCloseTo(0.75, 12);
    expect(Array.from(s.timesteps)).toEqual([1000, Math.fround(((3 * 0.75) / 2.5) * 1000), 750, Math.fround((0.75 / 1.5) * 1000)]);
  });

  it.each([1, 7, 50])('lands exactly on a single data point with its exact velocity (%i steps)', (steps) => {
    // For data x* the exact velocity at x_σ is (x_σ − x*)/σ; the flow is a straight line, so
    // Euler follows it exactly: x_i = x* + σ_i(ε − x*).
    const target = Float32Array.from([0.5, -0.25, 1, 0]);
    const eps = Float32Array.from([1.2, -0.7, 0.1, 2]);
    const s = new FlowEulerSampler(steps, 2);
    const x = Float32Array.from(eps);
    for (let i = 0; i < steps; i += 1) {
      const sigma = s.sigmas[i];
      for (let k = 0; k < x.length; k += 1) {
        expect(x[k]).toBeCloseTo(target[k] + sigma * (eps[k] - target[k]), 5);
      }
      const v = x.map((xv, k) => (xv - target[k]) / sigma);
      s.step(x, v, i);
    }
    for (let k = 0; k < x.length; k += 1) expect(x[k]).toBeCloseTo(target[k], 5);
  });
});

describe('DdimSampler', () => {
  it('computes the scaled-linear cumulative alphas in closed form', () => {
    const a = alphasCumprod(ddimCfg);
    let prod = 1;
    for (let t = 0; t <= 999; t += 1) {
      const beta = (Math.sqrt(0.00085) + (t / 999) * (Math.sqrt(0.012) - Math.sqrt(0.00085))) ** 2;
      prod *= 1 - beta;
    }
    expect(a[999]).toBeCloseTo(prod, 12);
    expect(a[0]).toBeCloseTo(1 - 0.00085, 12);
    expect(a[999]).toBeGreaterThan(0.004);
    expect(a[999]).toBeLessThan(0.006);
  });

  it('uses leading spacing with offset 1', () => {
    expect(Array.from(new DdimSampler(4, ddimCfg).timesteps)).toEqual([751, 501, 251, 1]);
  });

  it.each([1, 10, 25])('recovers a single data point from its exact noise prediction (%i steps)', (steps) => {
    const target = Float32Array.from([0.3, -0.9, 0.0, 0.75]);
    const s = new DdimSampler(steps, ddimCfg);
    const x = Float32Array.from([0.4, -1.5, 2.2, -0.3]);
    for (let i = 0; i < steps; i += 1) {
      const [a] = s.alphaPair(i);
      // Exact ε for x = √ᾱ·x* + √(1−ᾱ)·ε.
      const eps = x.map((xv, k) => (xv - Math.sqrt(a) * target[k]) / Math.sqrt(1 - a));
      s.step(x, eps, i);
    }
    for (let k = 0; k < x.length; k += 1) expect(x[k]).toBeCloseTo(target[k], 4);
  });

  it('keeps the noise direction between steps (DDIM is deterministic given ε)', () => {
    const s = new DdimSampler(2, ddimCfg);
    const eps = Float32Array.from([1, -1]);
    const x = Float32Array.from([0.2, 0.1]);
    const [a, ap] = s.alphaPair(0);
    const x0 = [0.2, 0.1].map((v, k) => (v - Math.sqrt(1 - a) * eps[k]) / Math.sqrt(a));
    s.step(x, eps, 0);
    x0.forEach((v, k) => expect(x[k]).toBeCloseTo(Math.sqrt(ap) * v + Math.sqrt(1 - ap) * eps[k], 6));
  });
});

describe('applyGuidance', () => {
  it('is uncond at scale 0, cond at scale 1 and extrapolates beyond', () => {
    const u = () => Float32Array.from([1, 2]);
    const c = Float32Array.from([3, 1]);
    expect(Array.from(applyGuidance(u(), c, 0))).toEqual([1, 2]);
    expect(Array.from(applyGuidance(u(), c, 1))).toEqual([3, 1]);
    expect(Array.from(applyGuidance(u(), c, 2.5))).toEqual([6, -0.5]);
  });
});
