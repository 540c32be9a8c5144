import { describe, expect, it } from 'vitest';
import { createScheduler } from './create-scheduler.js';
import { pattern } from './test-support.js';
import type { NoiseSource } from './types.js';

/**
 * One step of each scheduler against the closed form of its published formula, evaluated here
 * in float64 with an independently computed noise schedule (so agreement is to float32
 * precision, not bit for bit).
 */

const LATENT = { beta_start: 0.00085, beta_end: 0.012, beta_schedule: 'scaled_linear', num_train_timesteps: 1000 };
const AB = (() => {
  const out: number[] = [];
  let p = 1;
  for (let t = 0; t < 1000; t += 1) {
    p *= 1 - (Math.sqrt(0.00085) + (t / 999) * (Math.sqrt(0.012) - Math.sqrt(0.00085))) ** 2;
    out.push(p);
  }
  return out;
})();
const sigmaOf = (t: number): number => {
  const j = Math.floor(t);
  const s = (k: number): number => Math.sqrt((1 - AB[k]) / AB[k]);
  return j === t ? s(j) : s(j) + (s(j + 1) - s(j)) * (t - j);
};
const n = 16;
const X = pattern(1, 0, n).map((v) => 3 * v);
const OUT = pattern(2, 0, n);
const Z = pattern(3, 0, n);
const fixedNoise: NoiseSource = { normals: (m) => Z.slice(0, m) };

function expectClose(got: Float32Array, want: (k: number) => number, rel = 2e-5): void {
  got.forEach((v, k) => {
    const w = want(k);
    expect(Math.abs(v - w), `element ${k}: ${v} vs ${w}`).toBeLessThanOrEqual(rel * Math.max(1, Math.abs(w)));
  });
}

describe('one step against the closed form', () => {
  it('DDIM, η = 0: x′ = √ᾱ′·x̂₀ + √(1 − ᾱ′)·ε, x̂₀ = (x − √(1 − ᾱ)·ε)/√ᾱ', () => {
    const s = createScheduler({ _class_name: 'DDIMScheduler', ...LATENT, clip_sample: false, steps_offset: 1 }, { steps: 50 });
    const [t, tp] = [981, 961];
    expect([s.timesteps[0], s.timesteps[1]]).toEqual([t, tp]);
    const x1 = s.step(OUT, 0, X);
    expectClose(
      x1,
      (k) => Math.sqrt(AB[tp]) * ((X[k] - Math.sqrt(1 - AB[t]) * OUT[k]) / Math.sqrt(AB[t])) + Math.sqrt(1 - AB[tp]) * OUT[k],
    );
  });

  it('DDIM, η = 1, v-prediction: σ_η² = (1 − ᾱ′)/(1 − ᾱ)·(1 − ᾱ/ᾱ′), plus σ_η·z', () => {
    const s = createScheduler(
      { _class_name: 'DDIMScheduler', ...LATENT, clip_sample: false, prediction_type: 'v_prediction', timestep_spacing: 'trailing' },
      { steps: 10, eta: 1 },
    );
    const [t, tp] = [999, 899];
    const [a, ap] = [AB[t], AB[tp]];
    const std = Math.sqrt(((1 - ap) / (1 - a)) * (1 - a / ap));
    const x1 = s.step(OUT, 0, X, fixedNoise);
    expectClose(x1, (k) => {
      const x0 = Math.sqrt(a) * X[k] - Math.sqrt(1 - a) * OUT[k];
      const eps = Math.sqrt(a) * OUT[k] + Math.sqrt(1 - a) * X[k];
      return Math.sqrt(ap) * x0 + Math.sqrt(1 - ap - std * std) * eps + std * Z[k];
    });
  });

  it('PNDM (PLMS) first step: formula (9) of the PNDM paper', () => {
    const s = createScheduler(
      { _class_name: 'PNDMScheduler', ...LATENT, skip_prk_steps: true, steps_offset: 1, set_alpha_to_one: false },
      { steps: 50 },
    );
    const [a, ap] = [AB[981], AB[961]];
    const x1 = s.step(OUT, 0, X);
    const denom = a * Math.sqrt(1 - ap) + Math.sqrt(a * (1 - a) * ap);
    expectClose(x1, (k) => Math.sqrt(ap / a) * X[k] - ((ap - a) * OUT[k]) / denom);
    // the second call (same timestep 961) restarts from x at 981 with the mean of both outputs
    const out2 = pattern(4, 0, n);
    const x2 = s.step(out2, 1, x1);
    expectClose(x2, (k) => Math.sqrt(ap / a) * X[k] - ((ap - a) * ((OUT[k] + out2[k]) / 2)) / denom);
  });

  it('Euler: model input x/√(σ²+1); x′ = x + (σ₁ − σ₀)·ε', () => {
    const s = createScheduler({ _class_name: 'EulerDiscreteScheduler', ...LATENT, timestep_spacing: 'trailing' }, { steps: 10 });
    const [s0, s1] = [sigmaOf(999), sigmaOf(899)];
    expectClose(s.scaleModelInput(X, 0), (k) => X[k] / Math.sqrt(s0 * s0 + 1));
    expectClose(s.step(OUT, 0, X), (k) => X[k] + (s1 - s0) * OUT[k]);
  });

  it('Euler ancestral: σ↑ = √(σ₁²(σ₀² − σ₁²)/σ₀²), σ↓ = √(σ₁² − σ↑²), x′ = x + (σ↓ − σ₀)·ε + σ↑·z', () => {
    const s = createScheduler({ _class_name: 'EulerAncestralDiscreteScheduler', ...LATENT, timestep_spacing: 'trailing' }, { steps: 4 });
    const [s0, s1] = [sigmaOf(999), sigmaOf(749)];
    const up = Math.sqrt((s1 * s1 * (s0 * s0 - s1 * s1)) / (s0 * s0));
    const down = Math.sqrt(s1 * s1 - up * up);
    expectClose(s.step(OUT, 0, X, fixedNoise), (k) => X[k] + (down - s0) * OUT[k] + up * Z[k]);
  });

  it('DPM-Solver++ 2M: a first-order (DDIM) step, then the second-order midpoint step', () => {
    const s = createScheduler({ _class_name: 'DPMSolverMultistepScheduler', ...LATENT }, { steps: 20 });
    const ts = Array.from(s.timesteps.slice(0, 3)); // 999, 949, 899
    const vp = (t: number): { a: number; s: number; l: number } => {
      const a = Math.sqrt(AB[t]);
      const sg = Math.sqrt(1 - AB[t]);
      return { a, s: sg, l: Math.log(a / sg) };
    };
    const [p0, p1, p2] = ts.map(vp);
    const x0a = Float32Array.from(OUT, (e, k) => (X[k] - p0.s * e) / p0.a);
    const x1 = s.step(OUT, 0, X);
    expectClose(x1, (k) => p1.a * x0a[k] + (p1.s / p0.s) * (X[k] - p0.a * x0a[k]));
    const out2 = pattern(4, 0, n);
    const x0b = Float32Array.from(out2, (e, k) => (x1[k] - p1.s * e) / p1.a);
    const x2 = s.step(out2, 1, x1);
    const h = p2.l - p1.l;
    const r0 = (p1.l - p0.l) / h;
    expectClose(x2, (k) => (p2.s / p1.s) * x1[k] - p2.a * (Math.exp(-h) - 1) * (x0b[k] + (0.5 / r0) * (x0b[k] - x0a[k])), 1e-4);
  });

  it('LCM: denoised = c_out·x̂₀ + c_skip·x with c_skip = σ_d²/((10t)² + σ_d²), c_out = 10t/√((10t)² + σ_d²); re-noised to t′', () => {
    const s = createScheduler({ _class_name: 'LCMScheduler', ...LATENT }, { steps: 4 });
    const [t, tp] = [999, 759];
    const st = 10 * t;
    const cSkip = 0.25 / (st * st + 0.25);
    const cOut = st / Math.sqrt(st * st + 0.25);
    const x1 = s.step(OUT, 0, X, fixedNoise);
    expectClose(x1, (k) => {
      const x0 = (X[k] - Math.sqrt(1 - AB[t]) * OUT[k]) / Math.sqrt(AB[t]);
      return Math.sqrt(AB[tp]) * (cOut * x0 + cSkip * X[k]) + Math.sqrt(1 - AB[tp]) * Z[k];
    });
  });

  it('LCM last step returns the denoised sample without noise', () => {
    const s = createScheduler({ _class_name: 'LCMScheduler', ...LATENT }, { steps: 1 });
    expect(Array.from(s.timesteps)).toEqual([999]);
    const x1 = s.step(OUT, 0, X); // no NoiseSource needed
    const st = 9990;
    expectClose(x1, (k) => {
      const x0 = (X[k] - Math.sqrt(1 - AB[999]) * OUT[k]) / Math.sqrt(AB[999]);
      return (st / Math.sqrt(st * st + 0.25)) * x0 + (0.25 / (st * st + 0.25)) * X[k];
    });
  });

  it('flow match: x′ = x + (σ₁ − σ₀)·v; scale_noise = σ·ε + (1 − σ)·x₀', () => {
    const s = createScheduler({ _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 3.0 }, { steps: 28 });
    const [s0, s1] = [s.timesteps[0] / 1000, s.timesteps[1] / 1000];
    expectClose(s.step(OUT, 0, X), (k) => X[k] + (s1 - s0) * OUT[k]);
    expectClose(s.addNoise(X, Z, 1), (k) => s1 * Z[k] + (1 - s1) * X[k]);
  });

  it('img2img start (add_noise): √ᾱ·x₀ + √(1 − ᾱ)·ε (DDPM family), x₀ + σ·ε (Euler), α·x₀ + σ·ε (DPM)', () => {
    const ddim = createScheduler({ _class_name: 'DDIMScheduler', ...LATENT, steps_offset: 1 }, { steps: 50, strength: 0.5 });
    const t = ddim.timesteps[0];
    expect(t).toBe(481);
    expectClose(ddim.addNoise(X, Z, 0), (k) => Math.sqrt(AB[t]) * X[k] + Math.sqrt(1 - AB[t]) * Z[k]);
    const euler = createScheduler(
      { _class_name: 'EulerDiscreteScheduler', ...LATENT, timestep_spacing: 'leading', steps_offset: 1 },
      { steps: 50, strength: 0.5 },
    );
    expectClose(euler.addNoise(X, Z, 0), (k) => X[k] + sigmaOf(481) * Z[k]);
    const dpm = createScheduler({ _class_name: 'DPMSolverMultistepScheduler', ...LATENT }, { steps: 20, strength: 0.5 });
    const td = dpm.timesteps[0];
    expectClose(dpm.addNoise(X, Z, 0), (k) => Math.sqrt(AB[td]) * X[k] + Math.sqrt(1 - AB[td]) * Z[k]);
  });
});
