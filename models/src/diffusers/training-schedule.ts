/**
 * The training noise schedule of a DDPM-family `scheduler_config.json`, computed the way
 * diffusers does (float32 betas, cumulative product of 1 − β), and the log-σ interpolation
 * diffusers' Euler/Heun/DPM schedulers use to turn a σ back into a (fractional) timestep
 * (`_sigma_to_t`). The analytic UNet inverts exactly that interpolation, so it answers
 * exactly at fractional timesteps too.
 */

/** The fields of a DDPM-family scheduler config that shape the training schedule. */
export interface TrainingScheduleConfig {
  num_train_timesteps?: number;
  beta_start?: number;
  beta_end?: number;
  beta_schedule?: string;
  trained_betas?: number[] | null;
  rescale_betas_zero_snr?: boolean;
}

const fr = Math.fround;

/** Betas as diffusers computes them (float32). */
export function trainingBetas(cfg: TrainingScheduleConfig): Float32Array {
  const n = cfg.num_train_timesteps ?? 1000;
  if (cfg.trained_betas && cfg.trained_betas.length > 0) return Float32Array.from(cfg.trained_betas);
  const start = cfg.beta_start ?? 0.0001;
  const end = cfg.beta_end ?? 0.02;
  const schedule = cfg.beta_schedule ?? 'linear';
  const out = new Float32Array(n);
  const lin = (a: number, b: number, i: number) => (n === 1 ? a : a + ((b - a) * i) / (n - 1));
  switch (schedule) {
    case 'linear':
      for (let i = 0; i < n; i += 1) out[i] = lin(start, end, i);
      return out;
    case 'scaled_linear':
      for (let i = 0; i < n; i += 1) out[i] = fr(lin(Math.sqrt(start), Math.sqrt(end), i)) ** 2;
      return out;
    case 'squaredcos_cap_v2': {
      const abar = (t: number) => Math.cos(((t + 0.008) / 1.008) * (Math.PI / 2)) ** 2;
      for (let i = 0; i < n; i += 1) out[i] = Math.min(1 - abar((i + 1) / n) / abar(i / n), 0.999);
      return out;
    }
    default:
      throw new Error(`beta_schedule "${schedule}" is not supported`);
  }
}

/** ᾱ_t = ∏(1 − β) for t = 0 … N−1 (float32, like diffusers' `alphas_cumprod`). */
export function alphasCumprod(cfg: TrainingScheduleConfig): Float32Array {
  if (cfg.rescale_betas_zero_snr) {
    throw new Error('rescale_betas_zero_snr gives ᾱ = 0 at the last timestep (σ = ∞): not supported by the analytic models');
  }
  const betas = trainingBetas(cfg);
  const out = new Float32Array(betas.length);
  let acc = 1;
  for (let i = 0; i < betas.length; i += 1) {
    acc = fr(acc * fr(1 - betas[i]));
    out[i] = acc;
  }
  return out;
}

/** log σ_t with σ_t = √((1 − ᾱ_t)/ᾱ_t), the table `_sigma_to_t` interpolates in. */
export function logSigmas(cfg: TrainingScheduleConfig): Float32Array {
  const ac = alphasCumprod(cfg);
  return ac.map((a) => Math.log(Math.sqrt((1 - a) / a)));
}

/**
 * σ at a (possibly fractional) timestep t, inverting diffusers' `_sigma_to_t`: log σ is
 * interpolated linearly between the table entries ⌊t⌋ and ⌊t⌋+1 (the low index clipped to
 * N−2, as diffusers clips it). Integer timesteps give the table value itself.
 */
export function sigmaAtTimestep(logSigmaTable: ArrayLike<number>, t: number): number {
  const n = logSigmaTable.length;
  const lo = Math.max(0, Math.min(Math.floor(t), n - 2));
  const w = Math.min(1, Math.max(0, t - lo));
  return Math.exp((1 - w) * logSigmaTable[lo] + w * logSigmaTable[lo + 1]);
}

/** √ᾱ and √(1 − ᾱ) at timestep t (ᾱ = 1/(1 + σ²)). */
export function alphaSigmaAt(logSigmaTable: ArrayLike<number>, t: number): { sqrtAlphaBar: number; sqrtOneMinus: number } {
  const s = sigmaAtTimestep(logSigmaTable, t);
  const r = Math.sqrt(1 + s * s);
  return { sqrtAlphaBar: 1 / r, sqrtOneMinus: s / r };
}
