// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): scheduling_pndm.py (PNDMScheduler),
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidField, invalidOption, unsupported } from './errors.js';
import { img2imgStart } from './img2img-start.js';
import { ddpmAddNoise, readDdpmSchedule, spacedTimesteps, type TimestepSpacing } from './noise-schedule.js';
import { f } from './numeric.js';
import type { RunOptions } from './run-options.js';
import { fingerprintOf, requireBuffer, requireValue, SchedulerBase, type StepHistory } from './scheduler-base.js';

type Prediction = 'epsilon' | 'v_prediction';

const ONE_SIXTH = f(1 / 6);
const ONE_THIRD = f(1 / 3);
const ONE_24TH = f(1 / 24);

/**
 * diffusers `PNDMScheduler` (arXiv 2202.09778): pseudo Runge-Kutta warm-up (12 model calls on
 * the last four timesteps) then linear multistep; with `skip_prk_steps` the PLMS variant of
 * crowsonkb (the Stable Diffusion default), whose first timestep is evaluated twice.
 */
export class PndmScheduler extends SchedulerBase {
  readonly className = 'PNDMScheduler' as const;
  readonly timesteps: Float64Array;
  readonly initNoiseSigma = 1;

  // Running values, as in diffusers.
  private counter = 0;
  private ets: Float32Array[] = [];
  private curModelOutput: Float32Array | undefined;
  private curSample: Float32Array | undefined;

  constructor(
    private readonly ac: Float32Array,
    private readonly finalAlphaCumprod: number,
    /** N // num_inference_steps */
    private readonly stepRatio: number,
    private readonly prkTimesteps: Float64Array,
    private readonly skipPrkSteps: boolean,
    timesteps: Float64Array,
    private readonly prediction: Prediction,
    fingerprint: string,
  ) {
    super(fingerprint);
    this.timesteps = timesteps;
  }

  protected stepAt(mo: Float32Array, i: number, x: Float32Array): Float32Array {
    const t = this.timesteps[i];
    return this.counter < this.prkTimesteps.length && !this.skipPrkSteps ? this.stepPrk(mo, t, x) : this.stepPlms(mo, t, x);
  }

  private stepPrk(mo: Float32Array, passed: number, x: Float32Array): Float32Array {
    const diffToPrev = this.counter % 2 ? 0 : Math.floor(this.stepRatio / 2);
    const prev = passed - diffToPrev;
    const t = this.prkTimesteps[Math.floor(this.counter / 4) * 4];
    let modelOutput = mo;
    const n = mo.length;
    const phase = this.counter % 4;
    if (phase === 0) {
      this.curModelOutput = Float32Array.from(mo, (v) => f(ONE_SIXTH * v));
      this.ets.push(mo.slice());
      this.curSample = x.slice();
    } else if (phase === 1 || phase === 2) {
      const cur = this.curModelOutput ?? new Float32Array(n);
      this.curModelOutput = Float32Array.from(cur, (c, k) => f(c + f(ONE_THIRD * mo[k])));
    } else {
      const cur = this.curModelOutput ?? new Float32Array(n);
      modelOutput = Float32Array.from(cur, (c, k) => f(c + f(ONE_SIXTH * mo[k])));
      this.curModelOutput = undefined;
    }
    const out = this.prevSample(this.curSample ?? x, t, prev, modelOutput);
    this.counter += 1;
    return out;
  }

  private stepPlms(mo: Float32Array, passed: number, x: Float32Array): Float32Array {
    if (!this.skipPrkSteps && this.ets.length < 3) {
      throw unsupported(this.className, 'skip_prk_steps', 'PLMS needs the 12 PRK warm-up steps first');
    }
    let prev = passed - this.stepRatio;
    let t = passed;
    if (this.counter !== 1) {
      this.ets = this.ets.slice(-3);
      this.ets.push(mo.slice());
    } else {
      prev = passed;
      t = passed + this.stepRatio;
    }
    const e = this.ets;
    const len = e.length;
    let sample = x;
    let m: Float32Array;
    if (len === 1 && this.counter === 0) {
      m = mo;
      this.curSample = x.slice();
    } else if (len === 1 && this.counter === 1) {
      const e1 = e[0];
      m = Float32Array.from(mo, (v, k) => f(f(v + e1[k]) / 2));
      sample = this.curSample ?? x;
      this.curSample = undefined;
    } else if (len === 2) {
      const [e2, e1] = e;
      m = Float32Array.from(e1, (v, k) => f(f(f(3 * v) - e2[k]) / 2));
    } else if (len === 3) {
      const [e3, e2, e1] = e;
      m = Float32Array.from(e1, (v, k) => f(f(f(f(23 * v) - f(16 * e2[k])) + f(5 * e3[k])) / 12));
    } else {
      const [e4, e3, e2, e1] = e;
      m = Float32Array.from(e1, (v, k) => f(ONE_24TH * f(f(f(f(55 * v) - f(59 * e2[k])) + f(37 * e3[k])) - f(9 * e4[k]))));
    }
    const out = this.prevSample(sample, t, prev, m);
    this.counter += 1;
    return out;
  }

  /** Formula (9) of the PNDM paper: x_{t−δ} from x_t and ε. */
  private prevSample(x: Float32Array, t: number, prev: number, mo: Float32Array): Float32Array {
    const at = this.ac[t];
    const atp = prev >= 0 ? this.ac[prev] : this.finalAlphaCumprod;
    const bt = f(1 - at);
    const btp = f(1 - atp);
    let eps = mo;
    if (this.prediction === 'v_prediction') {
      const sa = f(Math.sqrt(at));
      const sb = f(Math.sqrt(bt));
      eps = Float32Array.from(mo, (v, k) => f(f(sa * v) + f(sb * x[k])));
    }
    const sampleCoeff = f(Math.sqrt(f(atp / at)));
    const denom = f(f(at * f(Math.sqrt(btp))) + f(Math.sqrt(f(f(at * bt) * atp))));
    const d = f(atp - at);
    const out = new Float32Array(x.length);
    for (let k = 0; k < out.length; k += 1) out[k] = f(f(sampleCoeff * x[k]) - f(f(d * eps[k]) / denom));
    return out;
  }

  addNoise(original: Float32Array, noise: Float32Array, i: number): Float32Array {
    this.checkIndex(i);
    this.checkSameLength(original, noise, 'original and noise');
    return ddpmAddNoise(this.ac[this.timesteps[i]], original, noise);
  }

  protected saveHistory(): StepHistory {
    const buffers: Record<string, Float32Array> = {};
    this.ets.forEach((e, k) => (buffers[`ets.${k}`] = e));
    if (this.curModelOutput) buffers.cur_model_output = this.curModelOutput;
    if (this.curSample) buffers.cur_sample = this.curSample;
    return { values: { counter: this.counter, ets: this.ets.length }, buffers };
  }

  protected loadHistory(h: StepHistory): void {
    const count = requireValue(h, 'ets', this.className);
    this.counter = requireValue(h, 'counter', this.className);
    this.ets = Array.from({ length: count }, (_, k) => requireBuffer(h, `ets.${k}`, this.className));
    this.curModelOutput = h.buffers.cur_model_output;
    this.curSample = h.buffers.cur_sample;
  }
}

export function createPndmScheduler(r: ConfigReader, o: RunOptions): PndmScheduler {
  const sched = readDdpmSchedule(r, { betaStart: 0.0001, betaEnd: 0.02, betaSchedule: 'linear' }, false);
  const skipPrkSteps = r.bool('skip_prk_steps', false);
  const setAlphaToOne = r.bool('set_alpha_to_one', false);
  const prediction = r.choice<Prediction>('prediction_type', 'epsilon', ['epsilon', 'v_prediction', 'sample'], ['epsilon', 'v_prediction']);
  const spacing = r.choice<TimestepSpacing>('timestep_spacing', 'leading', ['linspace', 'leading', 'trailing']);
  const stepsOffset = r.int('steps_offset', 0, 0);
  const N = sched.numTrainTimesteps;
  const n = o.steps;
  if (n > N) throw invalidOption('steps', `${n} is more than num_train_timesteps (${N})`);
  // diffusers' `_timesteps`, ascending.
  const base = spacedTimesteps(spacing, N, n, stepsOffset, true).reverse();
  let prk: Float64Array;
  let plms: Float64Array;
  if (skipPrkSteps) {
    prk = new Float64Array(0);
    // concat(_t[:-1], _t[-2:-1], _t[-1:])[::-1]
    plms = Float64Array.from([...base.slice(0, -1), ...base.slice(-2, -1), ...base.slice(-1)]).reverse();
  } else {
    if (n < 4) throw invalidOption('steps', `PNDM with its PRK warm-up (skip_prk_steps false) needs at least 4 steps, got ${n}`);
    if (o.strength < 1) {
      // The warm-up always runs on the first timesteps of the full schedule (prk_timesteps),
      // whatever the img2img start: diffusers runs it and returns a wrong image.
      throw unsupported(
        r.className,
        'skip_prk_steps',
        '= false cannot start mid-schedule (img2img strength < 1): the Runge-Kutta warm-up always runs on the first timesteps; use skip_prk_steps true',
      );
    }
    const half = Math.floor(Math.floor(N / n) / 2);
    const last4 = Array.from(base.slice(-4));
    // _t[-4:].repeat(2) + tile([0, half], 4), then [:-1].repeat(2)[1:-1], reversed
    const pairs = last4.flatMap((t) => [t, t + half]);
    const doubled = pairs.slice(0, -1).flatMap((t) => [t, t]);
    prk = Float64Array.from(doubled.slice(1, -1)).reverse();
    plms = base.slice(0, -3).reverse();
  }
  const full = Float64Array.from([...prk, ...plms]);
  if (full.some((t) => t < 0 || t > N - 1)) {
    throw invalidField('steps_offset', `${stepsOffset} pushes a timestep outside 0…${N - 1} with ${n} steps`);
  }
  const start = o.strength < 1 ? img2imgStart('ddpm', n, o.strength) : 0;
  const fp = fingerprintOf({ c: r.className, cfg: r.used, o });
  return new PndmScheduler(
    sched.alphasCumprod,
    setAlphaToOne ? 1 : sched.alphasCumprod[0],
    Math.floor(N / n),
    prk,
    skipPrkSteps,
    full.slice(start),
    prediction,
    fp,
  );
}
