// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): scheduling_euler_discrete.py (EulerDiscreteScheduler),
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidOption } from './errors.js';
import { img2imgStart } from './img2img-start.js';
import {
  interpSigmas,
  karrasSigmas,
  logSigmasF32,
  readDdpmSchedule,
  sigmasFromAlphasCumprod,
  sigmaToT,
  spacedTimesteps,
  type TimestepSpacing,
} from './noise-schedule.js';
import { f } from './numeric.js';
import type { RunOptions } from './run-options.js';
import { fingerprintOf, SchedulerBase, type StepHistory } from './scheduler-base.js';

/** The σ-space (Karras "VE") schedule shared by Euler and Euler ancestral. */
export interface EulerSchedule {
  /** Model timestep per step, float32 values. */
  timesteps: Float64Array;
  /** σ per step plus the final σ (float32 values), length steps + 1. */
  sigmas: Float32Array;
  initNoiseSigma: number;
}

export interface EulerScheduleConfig {
  ac: Float32Array;
  numTrain: number;
  spacing: TimestepSpacing;
  stepsOffset: number;
  karras: boolean;
  sigmaMin?: number;
  sigmaMax?: number;
  finalSigma: 'zero' | 'sigma_min';
  continuousV: boolean;
}

/** diffusers `EulerDiscreteScheduler.set_timesteps` (linear interpolation of σ in t). */
export function eulerSchedule(c: EulerScheduleConfig, steps: number): EulerSchedule {
  const trainSigmas = sigmasFromAlphasCumprod(c.ac);
  const logSigmas = logSigmasF32(trainSigmas);
  // np.float32 timesteps (linspace is built in float64, then cast)
  let ts: Float64Array = Float64Array.from(spacedTimesteps(c.spacing, c.numTrain, steps, c.stepsOffset, false), (t) => f(t));
  let sig = interpSigmas(ts, trainSigmas);
  if (c.karras) {
    sig = karrasSigmas(c.sigmaMin ?? sig[sig.length - 1], c.sigmaMax ?? sig[0], steps);
    ts = sig.map((s) => sigmaToT(s, logSigmas));
  }
  const last = c.finalSigma === 'sigma_min' ? trainSigmas[0] : 0;
  const sigmas = Float32Array.from([...sig, last]);
  const timesteps = c.continuousV
    ? Float64Array.from(sigmas.subarray(0, steps), (s) => f(0.25 * f(Math.log(s))))
    : Float64Array.from(ts, (t) => f(t));
  let max = 0;
  for (const s of sigmas) max = Math.max(max, s);
  const initNoiseSigma = c.spacing === 'linspace' || c.spacing === 'trailing' ? max : f(Math.sqrt(f(f(max * max) + 1)));
  return { timesteps, sigmas, initNoiseSigma };
}

/** √(σ² + 1), the Euler input scaling, in float32. */
export function inputScale(sigma: number): number {
  return f(Math.sqrt(f(f(sigma * sigma) + 1)));
}

/** x₀ from the model output in σ space (Euler, Euler ancestral). */
export function eulerX0(prediction: 'epsilon' | 'v_prediction' | 'sample', mo: Float32Array, x: Float32Array, s: number): Float32Array {
  if (prediction === 'sample') return mo;
  if (prediction === 'epsilon') return Float32Array.from(mo, (v, k) => f(x[k] - f(s * v)));
  // denoised = model_output · c_out + input · c_skip
  const cOut = f(-s / inputScale(s));
  const den = f(f(s * s) + 1);
  return Float32Array.from(mo, (v, k) => f(f(v * cOut) + f(x[k] / den)));
}

type Prediction = 'epsilon' | 'v_prediction' | 'sample';

/**
 * What Euler and Euler ancestral share: a σ schedule (steps + 1 values, from index `begin`
 * for img2img), the model input x/√(σ²+1), noise added as x + σ·ε, and no history between
 * steps. Subclasses give the step.
 */
export abstract class SigmaSpaceScheduler extends SchedulerBase {
  readonly timesteps: Float64Array;
  readonly initNoiseSigma: number;

  protected constructor(
    protected readonly sigmas: Float32Array,
    /** Index of timesteps[0] in the full schedule (img2img `begin_index`). */
    protected readonly begin: number,
    timesteps: Float64Array,
    initNoiseSigma: number,
    fingerprint: string,
  ) {
    super(fingerprint);
    this.timesteps = timesteps;
    this.initNoiseSigma = initNoiseSigma;
  }

  override scaleModelInput(sample: Float32Array, i: number): Float32Array {
    this.checkIndex(i);
    const d = inputScale(this.sigmas[this.begin + i]);
    return Float32Array.from(sample, (v) => f(v / d));
  }

  addNoise(original: Float32Array, noise: Float32Array, i: number): Float32Array {
    this.checkIndex(i);
    this.checkSameLength(original, noise, 'original and noise');
    const s = this.sigmas[this.begin + i];
    return Float32Array.from(original, (v, k) => f(v + f(noise[k] * s)));
  }

  protected saveHistory(): StepHistory {
    return { values: {}, buffers: {} };
  }

  protected loadHistory(): void {}
}

/**
 * diffusers `EulerDiscreteScheduler` (Karras et al. 2022, Algorithm 2, without churn): in σ
 * space x ← x + (σ_{i+1} − σ_i)·(x − x̂₀)/σ_i; the model sees x/√(σ²+1).
 */
export class EulerDiscreteScheduler extends SigmaSpaceScheduler {
  readonly className = 'EulerDiscreteScheduler' as const;

  constructor(
    sigmas: Float32Array,
    begin: number,
    timesteps: Float64Array,
    initNoiseSigma: number,
    private readonly prediction: Prediction,
    fingerprint: string,
  ) {
    super(sigmas, begin, timesteps, initNoiseSigma, fingerprint);
  }

  protected stepAt(mo: Float32Array, i: number, x: Float32Array): Float32Array {
    const s = this.sigmas[this.begin + i];
    const dt = f(this.sigmas[this.begin + i + 1] - s);
    const x0 = eulerX0(this.prediction, mo, x, s);
    return Float32Array.from(x, (v, k) => f(v + f(f(f(v - x0[k]) / s) * dt)));
  }
}

/** Reads the DDPM schedule with the Euler family's zero-terminal-SNR tweak (ᾱ_last = 2⁻²⁴). */
export function readEulerAlphas(r: ConfigReader): { ac: Float32Array; numTrain: number } {
  const sched = readDdpmSchedule(r, { betaStart: 0.0001, betaEnd: 0.02, betaSchedule: 'linear' }, true);
  const ac = sched.alphasCumprod;
  // "Close to 0 without being 0 so first sigma is not inf"
  if (sched.rescaleBetasZeroSnr) ac[ac.length - 1] = 2 ** -24;
  return { ac, numTrain: sched.numTrainTimesteps };
}

export function createEulerDiscreteScheduler(r: ConfigReader, o: RunOptions): EulerDiscreteScheduler {
  const { ac, numTrain } = readEulerAlphas(r);
  let prediction = r.choice<Prediction | 'original_sample'>('prediction_type', 'epsilon', [
    'epsilon',
    'v_prediction',
    'sample',
    'original_sample',
  ]);
  if (prediction === 'original_sample') prediction = 'sample';
  r.choice('interpolation_type', 'linear', ['linear', 'log_linear'], ['linear']);
  const karras = r.bool('use_karras_sigmas', false);
  r.refuseIfTrue('use_exponential_sigmas', 'only linear and Karras sigmas are implemented');
  r.refuseIfTrue('use_beta_sigmas', 'only linear and Karras sigmas are implemented');
  const sigmaMin = r.optionalNumber('sigma_min', { gt: 0 });
  const sigmaMax = r.optionalNumber('sigma_max', { gt: 0 });
  const spacing = r.choice<TimestepSpacing>('timestep_spacing', 'linspace', ['linspace', 'leading', 'trailing']);
  const timestepType = r.choice<string>('timestep_type', 'discrete', ['discrete', 'continuous']);
  const stepsOffset = r.int('steps_offset', 0, 0);
  const finalSigma = r.choice<'zero' | 'sigma_min'>('final_sigmas_type', 'zero', ['zero', 'sigma_min']);
  if (o.steps > numTrain) throw invalidOption('steps', `${o.steps} is more than num_train_timesteps (${numTrain})`);
  if (o.steps < 2 && karras) throw invalidOption('steps', 'Karras sigmas need at least 2 steps');
  const sched = eulerSchedule(
    {
      ac,
      numTrain,
      spacing,
      stepsOffset,
      karras,
      sigmaMin,
      sigmaMax,
      finalSigma,
      continuousV: timestepType === 'continuous' && prediction === 'v_prediction',
    },
    o.steps,
  );
  const begin = o.strength < 1 ? img2imgStart('ddpm', o.steps, o.strength) : 0;
  const fp = fingerprintOf({ c: r.className, cfg: r.used, o });
  return new EulerDiscreteScheduler(sched.sigmas, begin, sched.timesteps.slice(begin), sched.initNoiseSigma, prediction, fp);
}
