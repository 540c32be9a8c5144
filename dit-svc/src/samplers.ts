import type { ModelManifest } from '@diffmesh/stage-host';

/**
 * A sampler turns a model's prediction at step `i` into the latent for step `i + 1`.
 * `timesteps[i]` is the value fed to the denoiser's `timestep` input at step `i`.
 */
export interface Sampler {
  readonly timesteps: Float32Array;
  /** In-place update of `x` from the model output `out` at step `i`. */
  step(x: Float32Array, out: Float32Array, i: number): void;
}

/**
 * Flow-matching Euler: x_σ = (1 − σ)·x₀ + σ·ε, the model predicts v = ε − x₀, and
 * x ← x + (σ_{i+1} − σ_i)·v, from σ = 1 down to 0. `shift` bends the schedule towards
 * high noise: σ' = shift·σ / (1 + (shift − 1)·σ).
 */
export class FlowEulerSampler implements Sampler {
  readonly sigmas: Float64Array;
  readonly timesteps: Float32Array;

  constructor(steps: number, shift = 1) {
    assertSteps(steps);
    this.sigmas = new Float64Array(steps + 1);
    for (let i = 0; i <= steps; i += 1) {
      const s = 1 - i / steps;
      this.sigmas[i] = (shift * s) / (1 + (shift - 1) * s);
    }
    this.timesteps = Float32Array.from(this.sigmas.subarray(0, steps), (s) => s * 1000);
  }

  step(x: Float32Array, v: Float32Array, i: number): void {
    const dt = this.sigmas[i + 1] - this.sigmas[i];
    for (let k = 0; k < x.length; k += 1) x[k] += dt * v[k];
  }
}

export interface DdimConfig {
  numTrainTimesteps: number;
  betaStart: number;
  betaEnd: number;
  betaSchedule: 'linear' | 'scaled_linear';
}

/** ᾱ_t = ∏_{s ≤ t} (1 − β_s) for the training schedule. */
export function alphasCumprod(cfg: DdimConfig): Float64Array {
  const n = cfg.numTrainTimesteps;
  const out = new Float64Array(n);
  let prod = 1;
  for (let t = 0; t < n; t += 1) {
    const frac = n === 1 ? 0 : t / (n - 1);
    const beta =
      cfg.betaSchedule === 'linear'
        ? cfg.betaStart + frac * (cfg.betaEnd - cfg.betaStart)
        : (Math.sqrt(cfg.betaStart) + frac * (Math.sqrt(cfg.betaEnd) - Math.sqrt(cfg.betaStart))) ** 2;
    prod *= 1 - beta;
    out[t] = prod;
  }
  return out;
}

/**
 * DDIM (η = 0) for ε-prediction models, "leading" timestep spacing with the final ᾱ = 1:
 * x₀ = (x − √(1−ᾱ_t)·ε)/√ᾱ_t, then x ← √ᾱ_prev·x₀ + √(1−ᾱ_prev)·ε.
 */
export class DdimSampler implements Sampler {
  readonly timesteps: Float32Array;
  private readonly alphas: Float64Array;

  constructor(steps: number, cfg: DdimConfig) {
    assertSteps(steps);
    this.alphas = alphasCumprod(cfg);
    const ratio = Math.floor(cfg.numTrainTimesteps / steps);
    this.timesteps = new Float32Array(steps);
    for (let i = 0; i < steps; i += 1) this.timesteps[i] = (steps - 1 - i) * ratio + 1;
    // Keep within range for steps close to numTrainTimesteps.
    for (let i = 0; i < steps; i += 1) {
      this.timesteps[i] = Math.min(this.timesteps[i], cfg.numTrainTimesteps - 1);
    }
  }

  /** ᾱ at step `i` (the current one) and at the step it moves to. */
  alphaPair(i: number): [number, number] {
    const t = this.timesteps[i];
    const prev = i + 1 < this.timesteps.length ? this.alphas[this.timesteps[i + 1]] : 1;
    return [this.alphas[t], prev];
  }

  step(x: Float32Array, eps: Float32Array, i: number): void {
    const [a, aPrev] = this.alphaPair(i);
    const sa = Math.sqrt(a);
    const s1a = Math.sqrt(1 - a);
    const sp = Math.sqrt(aPrev);
    const s1p = Math.sqrt(1 - aPrev);
    for (let k = 0; k < x.length; k += 1) {
      const x0 = (x[k] - s1a * eps[k]) / sa;
      x[k] = sp * x0 + s1p * eps[k];
    }
  }
}

function assertSteps(steps: number): void {
  if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`steps must be a positive integer, got ${steps}`);
}

/** The sampler a model's manifest asks for. */
export function samplerFor(manifest: ModelManifest, steps: number): Sampler {
  const s = manifest.sampler;
  return s.type === 'flow_euler' ? new FlowEulerSampler(steps, s.shift) : new DdimSampler(steps, s);
}

/** Classifier-free guidance: out = uncond + g·(cond − uncond), written into `uncond`. */
export function applyGuidance(uncond: Float32Array, cond: Float32Array, scale: number): Float32Array {
  for (let k = 0; k < uncond.length; k += 1) uncond[k] += scale * (cond[k] - uncond[k]);
  return uncond;
}
