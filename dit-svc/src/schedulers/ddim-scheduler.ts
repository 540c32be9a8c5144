// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): scheduling_ddim.py (DDIMScheduler),
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidField, invalidOption } from './errors.js';
import { img2imgStart } from './img2img-start.js';
import { ddpmAddNoise, readDdpmSchedule, spacedTimesteps, type TimestepSpacing } from './noise-schedule.js';
import { f } from './numeric.js';
import type { RunOptions } from './run-options.js';
import { clipPrediction, readSampleClipping, type SampleClipping } from './sample-clipping.js';
import { fingerprintOf, SchedulerBase, type StepHistory } from './scheduler-base.js';
import type { NoiseSource } from './types.js';

type Prediction = 'epsilon' | 'sample' | 'v_prediction';

/**
 * diffusers `DDIMScheduler` (arXiv 2010.02502, formulas 12 and 16), η from the run options
 * (the pipelines' `eta` argument). Note that diffusers' previous timestep is always
 * `t − N // n`, whatever the spacing.
 */
export class DdimScheduler extends SchedulerBase {
  readonly className = 'DDIMScheduler' as const;
  readonly timesteps: Float64Array;
  readonly initNoiseSigma = 1;

  constructor(
    private readonly ac: Float32Array,
    private readonly finalAlphaCumprod: number,
    private readonly stepRatio: number,
    timesteps: Float64Array,
    private readonly prediction: Prediction,
    private readonly clipping: SampleClipping,
    private readonly eta: number,
    private readonly batchSize: number,
    fingerprint: string,
  ) {
    super(fingerprint);
    this.timesteps = timesteps;
  }

  protected stepAt(mo: Float32Array, i: number, x: Float32Array, noise?: NoiseSource): Float32Array {
    const t = this.timesteps[i];
    const prev = t - this.stepRatio;
    const at = this.ac[t];
    const atp = prev >= 0 ? this.ac[prev] : this.finalAlphaCumprod;
    const bt = f(1 - at);
    const sa = f(Math.sqrt(at));
    const sb = f(Math.sqrt(bt));
    const n = x.length;
    const x0 = new Float32Array(n);
    const eps = new Float32Array(n);
    for (let k = 0; k < n; k += 1) {
      if (this.prediction === 'epsilon') {
        x0[k] = f(f(x[k] - f(sb * mo[k])) / sa);
        eps[k] = mo[k];
      } else if (this.prediction === 'sample') {
        x0[k] = mo[k];
        eps[k] = f(f(x[k] - f(sa * mo[k])) / sb);
      } else {
        x0[k] = f(f(sa * x[k]) - f(sb * mo[k]));
        eps[k] = f(f(sa * mo[k]) + f(sb * x[k]));
      }
    }
    clipPrediction(x0, this.clipping, this.batchSize);
    // σ_t(η) = η·√((1 − ᾱ_prev)/(1 − ᾱ_t) · (1 − ᾱ_t/ᾱ_prev))
    const btp = f(1 - atp);
    const variance = f(f(btp / bt) * f(1 - f(at / atp)));
    const std = f(f(this.eta) * f(Math.sqrt(variance)));
    const dirCoeff = f(Math.sqrt(f(f(1 - atp) - f(std * std))));
    const sap = f(Math.sqrt(atp));
    const out = new Float32Array(n);
    for (let k = 0; k < n; k += 1) out[k] = f(f(sap * x0[k]) + f(dirCoeff * eps[k]));
    if (this.eta > 0) {
      const z = this.drawNoise(noise, n, 'DDIM with eta > 0');
      for (let k = 0; k < n; k += 1) out[k] = f(out[k] + f(std * z[k]));
    }
    return out;
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

export function createDdimScheduler(r: ConfigReader, o: RunOptions): DdimScheduler {
  const sched = readDdpmSchedule(r, { betaStart: 0.0001, betaEnd: 0.02, betaSchedule: 'linear' }, true);
  const clipping = readSampleClipping(r, true);
  const setAlphaToOne = r.bool('set_alpha_to_one', true);
  const stepsOffset = r.int('steps_offset', 0, 0);
  const prediction = r.choice<Prediction>('prediction_type', 'epsilon', ['epsilon', 'sample', 'v_prediction']);
  const spacing = r.choice<TimestepSpacing>('timestep_spacing', 'leading', ['leading', 'trailing', 'linspace']);
  const N = sched.numTrainTimesteps;
  if (o.steps > N) throw invalidOption('steps', `${o.steps} is more than num_train_timesteps (${N})`);
  const full = spacedTimesteps(spacing, N, o.steps, stepsOffset, true);
  if (full.some((t) => t < 0 || t > N - 1)) {
    throw invalidField('steps_offset', `${stepsOffset} pushes a timestep outside 0…${N - 1} with ${o.steps} steps`);
  }
  const start = o.strength < 1 ? img2imgStart('ddpm', o.steps, o.strength) : 0;
  const fp = fingerprintOf({ c: r.className, cfg: r.used, o });
  return new DdimScheduler(
    sched.alphasCumprod,
    setAlphaToOne ? 1 : sched.alphasCumprod[0],
    Math.floor(N / o.steps),
    full.slice(start),
    prediction,
    clipping,
    o.eta,
    o.batchSize,
    fp,
  );
}
