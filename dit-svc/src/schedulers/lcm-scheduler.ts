// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): scheduling_lcm.py (LCMScheduler),
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidField, invalidOption } from './errors.js';
import { ddpmAddNoise, readDdpmSchedule } from './noise-schedule.js';
import { f, npLinspace } from './numeric.js';
import type { RunOptions } from './run-options.js';
import { clipPrediction, readSampleClipping, type SampleClipping } from './sample-clipping.js';
import { fingerprintOf, SchedulerBase, type StepHistory } from './scheduler-base.js';
import type { NoiseSource } from './types.js';

type Prediction = 'epsilon' | 'sample' | 'v_prediction';

/** σ_data of the consistency-model boundary condition. */
const SIGMA_DATA_SQ = 0.25;

/**
 * diffusers `LCMScheduler` (Latent Consistency Models, arXiv 2310.04378): each step predicts
 * x₀, applies the boundary condition denoised = c_out·x̂₀ + c_skip·x_t, then re-noises to the
 * next timestep with fresh noise (not after the last step).
 */
export class LcmScheduler extends SchedulerBase {
  readonly className = 'LCMScheduler' as const;
  readonly timesteps: Float64Array;
  readonly initNoiseSigma = 1;

  constructor(
    private readonly ac: Float32Array,
    private readonly finalAlphaCumprod: number,
    timesteps: Float64Array,
    private readonly timestepScaling: number,
    private readonly prediction: Prediction,
    private readonly clipping: SampleClipping,
    private readonly batchSize: number,
    fingerprint: string,
  ) {
    super(fingerprint);
    this.timesteps = timesteps;
  }

  /** c_skip and c_out of `get_scalings_for_boundary_condition_discrete`, float32. */
  boundaryScalings(t: number): { cSkip: number; cOut: number } {
    const scaled = f(f(t) * f(this.timestepScaling));
    const d = f(f(scaled * scaled) + SIGMA_DATA_SQ);
    // `0.25 / tensor` is `tensor.reciprocal() * 0.25` in torch
    return { cSkip: f(f(1 / d) * SIGMA_DATA_SQ), cOut: f(scaled / f(Math.sqrt(d))) };
  }

  protected stepAt(mo: Float32Array, i: number, x: Float32Array, noise?: NoiseSource): Float32Array {
    const t = this.timesteps[i];
    const prev = i + 1 < this.timesteps.length ? this.timesteps[i + 1] : t;
    const at = this.ac[t];
    const atp = prev >= 0 ? this.ac[prev] : this.finalAlphaCumprod;
    const sa = f(Math.sqrt(at));
    const sb = f(Math.sqrt(f(1 - at)));
    const { cSkip, cOut } = this.boundaryScalings(t);
    let x0: Float32Array;
    if (this.prediction === 'epsilon') x0 = Float32Array.from(mo, (v, k) => f(f(x[k] - f(sb * v)) / sa));
    else if (this.prediction === 'sample') x0 = mo.slice();
    else x0 = Float32Array.from(mo, (v, k) => f(f(sa * x[k]) - f(sb * v)));
    clipPrediction(x0, this.clipping, this.batchSize);
    const denoised = Float32Array.from(x0, (v, k) => f(f(cOut * v) + f(cSkip * x[k])));
    if (i === this.timesteps.length - 1) return denoised;
    const z = this.drawNoise(noise, x.length, 'LCM re-noises between steps');
    const sap = f(Math.sqrt(atp));
    const sbp = f(Math.sqrt(f(1 - atp)));
    return Float32Array.from(denoised, (v, k) => f(f(sap * v) + f(sbp * z[k])));
  }

  addNoise(original: Float32Array, noise: Float32Array, i: number): Float32Array {
    this.checkIndex(i);
    this.checkSameLength(original, noise, 'original and noise');
    return ddpmAddNoise(this.ac[this.timesteps[i]], original, noise);
  }

  protected saveHistory(): StepHistory {
    return { values: {}, buffers: {} };
  }

  protected loadHistory(): void {}
}

/**
 * LCM timesteps (`set_timesteps`): the distillation schedule (k = N // original_steps)
 * `[1 … ⌊original_steps·strength⌋]·k − 1`, reversed, sampled at `floor(linspace(0, len, n,
 * endpoint=False))`. img2img strength is applied here, as the LCM img2img pipeline does.
 */
export function lcmTimesteps(numTrain: number, originalSteps: number, steps: number, strength: number): Float64Array {
  if (originalSteps > numTrain) {
    throw invalidField('original_inference_steps', `${originalSteps} is more than num_train_timesteps (${numTrain})`);
  }
  const k = Math.floor(numTrain / originalSteps);
  const count = Math.trunc(originalSteps * strength);
  const origin = Float64Array.from({ length: count }, (_, j) => (j + 1) * k - 1);
  if (steps > numTrain) throw invalidOption('steps', `${steps} is more than num_train_timesteps (${numTrain})`);
  if (Math.floor(origin.length / steps) < 1) {
    throw invalidOption(
      'steps',
      `original_inference_steps × strength = ${originalSteps} × ${strength} is smaller than steps (${steps}); lower steps or raise strength`,
    );
  }
  if (steps > originalSteps) {
    throw invalidOption('steps', `${steps} is more than original_inference_steps (${originalSteps})`);
  }
  origin.reverse();
  const idx = npLinspace(0, origin.length, steps, false);
  return Float64Array.from(idx, (v) => origin[Math.floor(v)]);
}

export function createLcmScheduler(r: ConfigReader, o: RunOptions): LcmScheduler {
  const sched = readDdpmSchedule(r, { betaStart: 0.00085, betaEnd: 0.012, betaSchedule: 'scaled_linear' }, true);
  const originalSteps = r.int('original_inference_steps', 50, 1);
  const clipping = readSampleClipping(r, false);
  const setAlphaToOne = r.bool('set_alpha_to_one', true);
  const prediction = r.choice<Prediction>('prediction_type', 'epsilon', ['epsilon', 'sample', 'v_prediction']);
  const timestepScaling = r.number('timestep_scaling', 10, { gt: 0 });
  const ts = lcmTimesteps(sched.numTrainTimesteps, originalSteps, o.steps, o.strength);
  const fp = fingerprintOf({ c: r.className, cfg: r.used, o });
  return new LcmScheduler(
    sched.alphasCumprod,
    setAlphaToOne ? 1 : sched.alphasCumprod[0],
    ts,
    timestepScaling,
    prediction,
    clipping,
    o.batchSize,
    fp,
  );
}
