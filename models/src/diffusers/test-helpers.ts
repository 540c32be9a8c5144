import * as ort from 'onnxruntime-node';
import { logSigmas, type TrainingScheduleConfig } from './training-schedule.js';

/**
 * Small helpers for tests that run the built directories with onnxruntime-node. Not part of
 * the package surface (not exported from index.ts).
 */

export async function runOnnx(file: string, feeds: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>> {
  const session = await ort.InferenceSession.create(file);
  try {
    return await session.run(feeds);
  } finally {
    await session.release();
  }
}

/** Largest absolute difference between two arrays. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i += 1) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** Seeded standard normals (mulberry32 + Box–Muller). */
export function randn(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const uni = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 1) out[i] = Math.sqrt(-2 * Math.log(Math.max(uni(), 1e-12))) * Math.cos(2 * Math.PI * uni());
  return out;
}

/**
 * Euler (diffusers EulerDiscreteScheduler) sigmas for a test loop: "leading" integer timesteps, or
 * `karras`, which uses Karras et al. ρ = 7 spacing, which calls the model at fractional timesteps.
 * Returns [σ, t] pairs, then a final σ = 0.
 */
export function eulerSchedule(
  cfg: TrainingScheduleConfig,
  steps: number,
  karras: boolean | 'linspace',
): Array<{ sigma: number; t: number }> {
  const table = logSigmas(cfg);
  const n = table.length;
  const sig = Array.from(table, (l) => Math.exp(l));
  const out: Array<{ sigma: number; t: number }> = [];
  const tOfSigma = (sigma: number) => {
    // diffusers' _sigma_to_t
    const ls = Math.log(Math.max(sigma, 1e-10));
    let lo = 0;
    for (let i = 0; i < n; i += 1) if (ls >= table[i]) lo = i;
    lo = Math.min(lo, n - 2);
    const w = Math.min(1, Math.max(0, (table[lo] - ls) / (table[lo] - table[lo + 1])));
    return (1 - w) * lo + w * (lo + 1);
  };
  if (karras === 'linspace') {
    // timestep_spacing "linspace", interpolation_type "linear": fractional t, σ interpolated linearly.
    for (let i = 0; i < steps; i += 1) {
      const t = ((n - 1) * (steps - 1 - i)) / (steps - 1);
      const lo = Math.min(Math.floor(t), n - 2);
      const w = t - lo;
      out.push({ sigma: (1 - w) * sig[lo] + w * sig[lo + 1], t });
    }
  } else if (karras) {
    const sMin = sig[0];
    const sMax = sig[n - 1];
    const rho = 7;
    for (let i = 0; i < steps; i += 1) {
      const r = i / (steps - 1);
      const sigma = (sMax ** (1 / rho) + r * (sMin ** (1 / rho) - sMax ** (1 / rho))) ** rho;
      out.push({ sigma, t: tOfSigma(sigma) });
    }
  } else {
    // "leading" spacing with steps_offset 1 (SD/SDXL defaults): integer timesteps.
    const ratio = Math.floor(n / steps);
    for (let i = steps - 1; i >= 0; i -= 1) {
      const t = Math.round(i * ratio) + 1;
      out.push({ sigma: sig[t], t });
    }
  }
  out.push({ sigma: 0, t: 0 });
  return out;
}
