// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): the β/ᾱ schedules and timestep spacings shared by its scheduling_*.py files,
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidField } from './errors.js';
import { cumprodF32, f, npInterpIndex, npLinspace, roundHalfEven, torchLinspaceF32 } from './numeric.js';

/**
 * The DDPM training schedule every discrete scheduler starts from: β, and ᾱ = ∏(1 − β), as
 * float32 tensors like diffusers' (`torch.linspace(..., dtype=torch.float32)`,
 * `torch.cumprod`).
 */
export interface DdpmSchedule {
  numTrainTimesteps: number;
  betaSchedule: 'linear' | 'scaled_linear' | 'squaredcos_cap_v2';
  /** ᾱ_t for t = 0…N−1 (float32). */
  alphasCumprod: Float32Array;
}

/** Which classes know `rescale_betas_zero_snr` (diffusers ignores it for the others). */
export function readDdpmSchedule(
  r: ConfigReader,
  defaults: { betaStart: number; betaEnd: number; betaSchedule: DdpmSchedule['betaSchedule'] },
  knowsZeroSnr: boolean,
): DdpmSchedule & { rescaleBetasZeroSnr: boolean } {
  const numTrainTimesteps = r.int('num_train_timesteps', 1000, 2);
  const trained = r.numberArray('trained_betas');
  const betaStart = r.number('beta_start', defaults.betaStart, { min: 0, lt: 1 });
  const betaEnd = r.number('beta_end', defaults.betaEnd, { min: 0, lt: 1 });
  const betaSchedule = r.choice('beta_schedule', defaults.betaSchedule, ['linear', 'scaled_linear', 'squaredcos_cap_v2']);
  const rescale = knowsZeroSnr ? r.bool('rescale_betas_zero_snr', false) : false;
  let betas: Float32Array;
  if (trained) {
    if (trained.length !== numTrainTimesteps) {
      throw invalidField('trained_betas', `has ${trained.length} values but num_train_timesteps is ${numTrainTimesteps}`);
    }
    if (trained.some((b) => !(b >= 0 && b < 1))) throw invalidField('trained_betas', 'values must be in [0, 1)');
    betas = Float32Array.from(trained);
  } else if (betaSchedule === 'linear') {
    betas = torchLinspaceF32(betaStart, betaEnd, numTrainTimesteps);
  } else if (betaSchedule === 'scaled_linear') {
    // torch.linspace(beta_start**0.5, beta_end**0.5, N, dtype=float32) ** 2
    betas = torchLinspaceF32(Math.sqrt(betaStart), Math.sqrt(betaEnd), numTrainTimesteps).map((b) => f(b * b));
  } else {
    betas = betasForAlphaBarCosine(numTrainTimesteps);
  }
  if (rescale) betas = rescaleZeroTerminalSnr(betas);
  const alphas = betas.map((b) => f(1 - b));
  return { numTrainTimesteps, betaSchedule, alphasCumprod: cumprodF32(alphas), rescaleBetasZeroSnr: rescale };
}

/** diffusers `betas_for_alpha_bar` (the "squaredcos_cap_v2" Glide cosine schedule), max β 0.999. */
export function betasForAlphaBarCosine(n: number, maxBeta = 0.999): Float32Array {
  const alphaBar = (t: number): number => {
    const c = Math.cos((((t + 0.008) / 1.008) * Math.PI) / 2);
    return c * c;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 1) {
    const t1 = i / n;
    const t2 = (i + 1) / n;
    out[i] = Math.min(1 - alphaBar(t2) / alphaBar(t1), maxBeta);
  }
  return out;
}

/** diffusers `rescale_zero_terminal_snr` (arXiv 2305.08891, Algorithm 1), in float32. */
export function rescaleZeroTerminalSnr(betas: Float32Array): Float32Array {
  const n = betas.length;
  const ac = cumprodF32(betas.map((b) => f(1 - b)));
  const s = ac.map((a) => f(Math.sqrt(a)));
  const s0 = s[0];
  const sT = s[n - 1];
  const scale = f(s0 / f(s0 - sT));
  const bar = new Float32Array(n);
  for (let i = 0; i < n; i += 1) {
    const v = f(f(s[i] - sT) * scale);
    bar[i] = f(v * v);
  }
  const out = new Float32Array(n);
  out[0] = f(1 - bar[0]);
  for (let i = 1; i < n; i += 1) out[i] = f(1 - f(bar[i] / bar[i - 1]));
  return out;
}

/** σ_t = √((1 − ᾱ_t)/ᾱ_t) as diffusers computes it on the float32 ᾱ tensor. */
export function sigmasFromAlphasCumprod(ac: Float32Array): Float32Array {
  return ac.map((a) => f(Math.sqrt(f(f(1 - a) / a))));
}

/** `np.log` of the float32 σ table (float32 result). */
export function logSigmasF32(sigmas: Float32Array): Float32Array {
  return sigmas.map((s) => Math.log(s));
}

/**
 * diffusers `_sigma_to_t`: the fractional training timestep whose log σ matches `sigma`, by
 * linear interpolation in the float32 log-σ table (float64 result).
 */
export function sigmaToT(sigma: number, logSigmas: Float32Array): number {
  const n = logSigmas.length;
  const logSigma = Math.log(Math.max(sigma, 1e-10));
  // low_idx = argmax(cumsum(dists >= 0)) = the last index with log σ_j ≤ log σ (0 if none).
  let low = 0;
  for (let j = 0; j < n; j += 1) if (logSigma - logSigmas[j] >= 0) low = j;
  low = Math.min(low, n - 2);
  const lo = logSigmas[low];
  const hi = logSigmas[low + 1];
  // `low - high` is float32 − float32 in numpy: a float32 result.
  let w = (lo - logSigma) / f(lo - hi);
  w = Math.min(Math.max(w, 0), 1);
  return (1 - w) * low + w * (low + 1);
}

/**
 * diffusers `_convert_to_karras` (Karras et al. 2022, ρ = 7): `steps` sigmas from σ_max down to
 * σ_min, float64.
 */
export function karrasSigmas(sigmaMin: number, sigmaMax: number, steps: number, rho = 7): Float64Array {
  const ramp = npLinspace(0, 1, steps);
  const minInvRho = Math.pow(sigmaMin, 1 / rho);
  const maxInvRho = Math.pow(sigmaMax, 1 / rho);
  return ramp.map((r) => Math.pow(maxInvRho + r * (minInvRho - maxInvRho), rho));
}

/** `np.interp(timesteps, np.arange(N), sigmas)` for every timestep (float64). */
export function interpSigmas(timesteps: ArrayLike<number>, sigmas: Float32Array): Float64Array {
  return Float64Array.from(timesteps, (t) => npInterpIndex(t, sigmas));
}

export type TimestepSpacing = 'linspace' | 'leading' | 'trailing';

/**
 * The DDIM/Euler timestep spacings (Table 2 of arXiv 2305.08891), as float64 values in
 * diffusers' descending order, before any dtype cast:
 * - linspace: `np.linspace(0, N−1, n)` reversed (rounded half-to-even when `round`),
 * - leading: `np.arange(n)·(N // n)` reversed, plus `steps_offset`,
 * - trailing: `np.round(np.arange(N, 0, −N/n)) − 1`.
 */
export function spacedTimesteps(
  spacing: TimestepSpacing,
  numTrain: number,
  steps: number,
  stepsOffset: number,
  round: boolean,
): Float64Array {
  let out: Float64Array;
  if (spacing === 'linspace') {
    out = npLinspace(0, numTrain - 1, steps).reverse();
    if (round) out = out.map(roundHalfEven);
  } else if (spacing === 'leading') {
    const ratio = Math.floor(numTrain / steps);
    out = new Float64Array(steps);
    for (let i = 0; i < steps; i += 1) out[i] = (steps - 1 - i) * ratio + stepsOffset;
  } else {
    const ratio = numTrain / steps;
    out = npArangeDescending(numTrain, ratio).map((t) => roundHalfEven(t) - 1);
  }
  return out;
}

/** `np.arange(start, 0, -step)` with a float step (numpy's fill rule). */
export function npArangeDescending(start: number, step: number): Float64Array {
  const len = Math.max(0, Math.ceil((0 - start) / -step));
  const out = new Float64Array(len);
  if (len > 0) out[0] = start;
  if (len > 1) out[1] = start + -step;
  const delta = len > 1 ? out[1] - out[0] : 0;
  for (let i = 2; i < len; i += 1) out[i] = start + i * delta;
  return out;
}

/**
 * DDPM `add_noise` (DDIM, PNDM, LCM img2img start): √ᾱ_t·x₀ + √(1 − ᾱ_t)·ε in float32, with
 * `alphaCumprod` = ᾱ_t (a float32 value).
 */
export function ddpmAddNoise(alphaCumprod: number, original: Float32Array, noise: Float32Array): Float32Array {
  const sa = f(Math.sqrt(alphaCumprod));
  const sb = f(Math.sqrt(f(1 - alphaCumprod)));
  const out = new Float32Array(original.length);
  for (let k = 0; k < out.length; k += 1) out[k] = f(f(sa * original[k]) + f(sb * noise[k]));
  return out;
}
