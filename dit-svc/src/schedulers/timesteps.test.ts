import { describe, expect, it } from 'vitest';
import { createScheduler } from './create-scheduler.js';
import { calculateShift, fluxPipelineSigmas } from './flow-match-euler-scheduler.js';

/**
 * Timesteps of known configurations, derived here by hand from the formulas in the diffusers
 * source (set_timesteps of each scheduler), in float64, independently of the implementation.
 */

const SD15 = {
  _class_name: 'PNDMScheduler',
  _diffusers_version: '0.6.0',
  beta_end: 0.012,
  beta_schedule: 'scaled_linear',
  beta_start: 0.00085,
  num_train_timesteps: 1000,
  set_alpha_to_one: false,
  skip_prk_steps: true,
  steps_offset: 1,
  trained_betas: null,
  clip_sample: false,
};
const LATENT = { beta_start: 0.00085, beta_end: 0.012, beta_schedule: 'scaled_linear', num_train_timesteps: 1000 };
const range = (n: number, fn: (k: number) => number): number[] => Array.from({ length: n }, (_, k) => fn(k));
/** numpy's round-half-to-even */
const npRound = (x: number): number => (Math.abs(x % 1) === 0.5 ? 2 * Math.round(x / 2) : Math.round(x));

/** ᾱ_t and σ_t = √((1 − ᾱ)/ᾱ) of the latent-diffusion schedule, float64. */
const AB = (() => {
  let p = 1;
  return range(1000, (t) => {
    const b = (Math.sqrt(0.00085) + (t / 999) * (Math.sqrt(0.012) - Math.sqrt(0.00085))) ** 2;
    p *= 1 - b;
    return p;
  });
})();
const SIGMA = AB.map((a) => Math.sqrt((1 - a) / a));

describe('timesteps', () => {
  it('SD 1.5 (PNDM, leading, steps_offset 1, skip_prk_steps): 981, 961, 961, 941 … 1 — the first PLMS step is evaluated twice', () => {
    const s = createScheduler(SD15, { steps: 50 });
    // _timesteps = arange(50)·20 + 1; plms = concat(_t[:-1], _t[-2:-1], _t[-1:])[::-1]
    const expected = [981, 961, ...range(49, (k) => 961 - 20 * k)];
    expect(Array.from(s.timesteps)).toEqual(expected);
    expect(s.initNoiseSigma).toBe(1);
  });

  it('PNDM with the PRK warm-up: 12 Runge-Kutta calls on the last 4 timesteps, then PLMS', () => {
    const s = createScheduler({ _class_name: 'PNDMScheduler' }, { steps: 10 });
    // _t = 0,100…900; h = 1000//10//2 = 50; prk = [900, 850, 850, 800, 800, 750, 750, 700, 700, 650, 650, 600]
    expect(Array.from(s.timesteps)).toEqual([900, 850, 850, 800, 800, 750, 750, 700, 700, 650, 650, 600, 600, 500, 400, 300, 200, 100, 0]);
  });

  it('DDIM: leading (+ steps_offset), trailing, linspace (rounded half to even)', () => {
    const ddim = (extra: object, steps: number): number[] =>
      Array.from(createScheduler({ _class_name: 'DDIMScheduler', ...LATENT, ...extra }, { steps }).timesteps);
    expect(ddim({ steps_offset: 1 }, 50)).toEqual(range(50, (k) => 981 - 20 * k));
    expect(ddim({ timestep_spacing: 'trailing' }, 10)).toEqual(range(10, (k) => 999 - 100 * k));
    expect(ddim({ timestep_spacing: 'trailing' }, 3)).toEqual([999, 666, 332]); // round(1000 − 333.3k) − 1
    expect(ddim({ timestep_spacing: 'linspace' }, 10)).toEqual(range(10, (k) => 999 - 111 * k));
    // 999·k/6: 832.5 → 832, 499.5 → 500, 166.5 → 166
    expect(ddim({ timestep_spacing: 'linspace' }, 7)).toEqual([999, 832, 666, 500, 333, 166, 0]);
  });

  it('img2img strength 0.5 starts half-way (StableDiffusionImg2ImgPipeline.get_timesteps)', () => {
    const s = createScheduler({ _class_name: 'DDIMScheduler', ...LATENT, steps_offset: 1 }, { steps: 25, strength: 0.5 });
    // timesteps 40·(24 − k) + 1; init = min(int(12.5), 25) = 12, t_start = 13: the last 12
    expect(Array.from(s.timesteps)).toEqual(range(12, (k) => 441 - 40 * k));
  });

  it('Euler: linspace timesteps are float32 values of 999·k/(n−1); leading ones integers; init σ', () => {
    const s = createScheduler({ _class_name: 'EulerDiscreteScheduler', ...LATENT }, { steps: 7 });
    expect(Array.from(s.timesteps)).toEqual(range(7, (k) => Math.fround((999 * (6 - k)) / 6)));
    // linspace: init_noise_sigma = max σ = σ(999)
    expect(s.initNoiseSigma).toBeCloseTo(SIGMA[999], 4);
    const sdxl = createScheduler(
      { _class_name: 'EulerDiscreteScheduler', ...LATENT, timestep_spacing: 'leading', steps_offset: 1 },
      { steps: 30 },
    );
    expect(Array.from(sdxl.timesteps)).toEqual(range(30, (k) => 33 * (29 - k) + 1));
    // leading: √(σ_max² + 1), σ_max = σ(958) by linear interpolation
    expect(sdxl.initNoiseSigma).toBeCloseTo(Math.sqrt(SIGMA[958] ** 2 + 1), 4);
  });

  it('Euler with Karras sigmas: t = the fractional timestep of each Karras σ (interpolated in log σ)', () => {
    const n = 10;
    const s = createScheduler({ _class_name: 'EulerDiscreteScheduler', ...LATENT, use_karras_sigmas: true }, { steps: n });
    const rho = 7;
    const [lo, hi] = [SIGMA[0], SIGMA[999]];
    const karras = range(n, (k) => (hi ** (1 / rho) + (k / (n - 1)) * (lo ** (1 / rho) - hi ** (1 / rho))) ** rho);
    const logS = SIGMA.map(Math.log);
    const tOf = (sig: number): number => {
      let j = 0;
      while (j < 998 && logS[j + 1] <= Math.log(sig)) j += 1;
      return j + (logS[j] - Math.log(sig)) / (logS[j] - logS[j + 1]);
    };
    const want = karras.map(tOf);
    expect(s.timesteps[0]).toBe(999);
    expect(s.timesteps[n - 1]).toBe(0);
    s.timesteps.forEach((t, k) => expect(t).toBeCloseTo(want[k], 2));
  });

  it('DPM-Solver++: linspace over n + 1 points minus the last; Karras timesteps rounded', () => {
    const s = createScheduler({ _class_name: 'DPMSolverMultistepScheduler', ...LATENT }, { steps: 20 });
    expect(Array.from(s.timesteps)).toEqual(range(20, (k) => npRound((999 * (20 - k)) / 20)));
    const kn = 12;
    const karras = createScheduler({ _class_name: 'DPMSolverMultistepScheduler', ...LATENT, use_karras_sigmas: true }, { steps: kn });
    expect(karras.timesteps[0]).toBe(999);
    expect(karras.timesteps[kn - 1]).toBe(0);
    expect(karras.timesteps.every(Number.isInteger)).toBe(true);
    for (let k = 1; k < kn; k += 1) expect(karras.timesteps[k]).toBeLessThanOrEqual(karras.timesteps[k - 1]);
  });

  it('LCM: original_inference_steps 50 at 4 steps → 999, 759, 499, 259; strength 0.5 → 499, 379, 259, 139', () => {
    const cfg = { _class_name: 'LCMScheduler', ...LATENT, original_inference_steps: 50 };
    // k = 20, origin = [19, 39 … 999], reversed, at floor(linspace(0, 50, 4, endpoint=False)) = [0, 12, 25, 37]
    expect(Array.from(createScheduler(cfg, { steps: 4 }).timesteps)).toEqual([999, 759, 499, 259]);
    // origin = [19 … 499] (25 values), indices floor([0, 6.25, 12.5, 18.75])
    expect(Array.from(createScheduler(cfg, { steps: 4, strength: 0.5 }).timesteps)).toEqual([499, 379, 259, 139]);
  });

  it('flow match with shift 3 (SD3): σ = 3s/(1 + 2s) over s from 1 to the shifted σ_min, t = 1000·σ', () => {
    const n = 28;
    const s = createScheduler({ _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 3.0 }, { steps: n });
    const shift = (v: number): number => (3 * v) / (1 + 2 * v);
    const sMin = shift(0.001); // __init__ already shifted the training σ_min; set_timesteps shifts again
    const want = range(n, (k) => 1000 * shift(1 + (k / (n - 1)) * (sMin - 1)));
    expect(s.timesteps[0]).toBe(1000);
    s.timesteps.forEach((t, k) => expect(t).toBeCloseTo(want[k], 2));
    expect(s.initNoiseSigma).toBe(1);
  });

  it('flow match with dynamic shifting (Flux): μ from the image sequence length, Flux pipeline sigmas', () => {
    expect(calculateShift(256)).toBeCloseTo(0.5, 12);
    expect(calculateShift(4096)).toBeCloseTo(1.15, 12);
    expect(calculateShift(1024)).toBeCloseTo(0.5 + (0.65 * 768) / 3840, 12);
    const n = 20;
    const cfg = {
      _class_name: 'FlowMatchEulerDiscreteScheduler',
      base_image_seq_len: 256,
      base_shift: 0.5,
      max_image_seq_len: 4096,
      max_shift: 1.15,
      num_train_timesteps: 1000,
      shift: 3.0,
      use_dynamic_shifting: true,
    };
    const s = createScheduler(cfg, { steps: n, imageSeqLen: 64 * 64, sigmas: fluxPipelineSigmas(n) });
    const mu = 1.15;
    const want = range(n, (k) => {
      const v = 1 + (k / (n - 1)) * (1 / n - 1);
      return (1000 * Math.exp(mu)) / (Math.exp(mu) + (1 / v - 1));
    });
    s.timesteps.forEach((t, k) => expect(t).toBeCloseTo(want[k], 2));
    // mu passed directly gives the same schedule
    const direct = createScheduler(cfg, { steps: n, mu, sigmas: fluxPipelineSigmas(n) });
    expect(Array.from(direct.timesteps)).toEqual(Array.from(s.timesteps));
  });

  it('flow match img2img: SD3/Flux t_start = int(max(n − n·strength, 0))', () => {
    const full = createScheduler({ _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 3.0 }, { steps: 10 });
    const i2i = createScheduler({ _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 3.0 }, { steps: 10, strength: 0.55 });
    // int(max(10 − 5.5, 0)) = 4 (the SD pipelines would start at 10 − int(5.5) = 5)
    expect(Array.from(i2i.timesteps)).toEqual(Array.from(full.timesteps.slice(4)));
  });
});
