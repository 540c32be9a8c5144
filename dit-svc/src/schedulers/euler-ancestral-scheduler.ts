// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): scheduling_euler_ancestral_discrete.py (EulerAncestralDiscreteScheduler),
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidOption } from './errors.js';
import { eulerSchedule, eulerX0, readEulerAlphas, SigmaSpaceScheduler } from './euler-discrete-scheduler.js';
import { img2imgStart } from './img2img-start.js';
import type { TimestepSpacing } from './noise-schedule.js';
import { f } from './numeric.js';
import type { RunOptions } from './run-options.js';
import { fingerprintOf } from './scheduler-base.js';
import type { NoiseSource } from './types.js';

type Prediction = 'epsilon' | 'v_prediction';

/**
 * diffusers `EulerAncestralDiscreteScheduler` (k-diffusion `sample_euler_ancestral`): an Euler
 * step down to σ_down, then fresh noise of size σ_up, where σ_up² + σ_down² = σ_{i+1}². Every
 * step draws noise (the last one with σ_up = 0), as diffusers does.
 */
export class EulerAncestralScheduler extends SigmaSpaceScheduler {
  readonly className = 'EulerAncestralDiscreteScheduler' as const;

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

  protected stepAt(mo: Float32Array, i: number, x: Float32Array, noise?: NoiseSource): Float32Array {
    const sFrom = this.sigmas[this.begin + i];
    const sTo = this.sigmas[this.begin + i + 1];
    const x0 = eulerX0(this.prediction, mo, x, sFrom);
    const to2 = f(sTo * sTo);
    const from2 = f(sFrom * sFrom);
    const sUp = f(Math.sqrt(f(f(to2 * f(from2 - to2)) / from2)));
    const sDown = f(Math.sqrt(f(to2 - f(sUp * sUp))));
    const dt = f(sDown - sFrom);
    const z = this.drawNoise(noise, x.length, 'Euler ancestral adds fresh noise every step');
    return Float32Array.from(x, (v, k) => f(f(v + f(f(f(v - x0[k]) / sFrom) * dt)) + f(z[k] * sUp)));
  }
}

export function createEulerAncestralScheduler(r: ConfigReader, o: RunOptions): EulerAncestralScheduler {
  const { ac, numTrain } = readEulerAlphas(r);
  const prediction = r.choice<Prediction>('prediction_type', 'epsilon', ['epsilon', 'v_prediction', 'sample'], ['epsilon', 'v_prediction']);
  const spacing = r.choice<TimestepSpacing>('timestep_spacing', 'linspace', ['linspace', 'leading', 'trailing']);
  const stepsOffset = r.int('steps_offset', 0, 0);
  if (o.steps > numTrain) throw invalidOption('steps', `${o.steps} is more than num_train_timesteps (${numTrain})`);
  const sched = eulerSchedule({ ac, numTrain, spacing, stepsOffset, karras: false, finalSigma: 'zero', continuousV: false }, o.steps);
  const begin = o.strength < 1 ? img2imgStart('ddpm', o.steps, o.strength) : 0;
  const fp = fingerprintOf({ c: r.className, cfg: r.used, o });
  return new EulerAncestralScheduler(sched.sigmas, begin, sched.timesteps.slice(begin), sched.initNoiseSigma, prediction, fp);
}
