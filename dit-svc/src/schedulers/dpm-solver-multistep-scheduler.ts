// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): scheduling_dpmsolver_multistep.py (DPMSolverMultistepScheduler),
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidOption, unsupported } from './errors.js';
import { readEulerAlphas } from './euler-discrete-scheduler.js';
import { img2imgStart } from './img2img-start.js';
import {
  interpSigmas,
  karrasSigmas,
  logSigmasF32,
  npArangeDescending,
  sigmasFromAlphasCumprod,
  sigmaToT,
  type TimestepSpacing,
} from './noise-schedule.js';
import { f, npLinspace, roundHalfEven } from './numeric.js';
import type { RunOptions } from './run-options.js';
import { clipPrediction, readSampleClipping, type SampleClipping } from './sample-clipping.js';
import { fingerprintOf, requireValue, SchedulerBase, type StepHistory } from './scheduler-base.js';

type Prediction = 'epsilon' | 'sample' | 'v_prediction';

interface DpmSettings {
  order: 1 | 2;
  solverType: 'midpoint' | 'heun';
  lowerOrderFinal: boolean;
  eulerAtFinal: boolean;
  finalSigmaZero: boolean;
  prediction: Prediction;
  clipping: SampleClipping;
  batchSize: number;
}

/** α_t = 1/√(σ²+1), σ_t = σ·α_t (VP), in float32 like diffusers' `_sigma_to_alpha_sigma_t`. */
function alphaSigma(s: number): [number, number] {
  const a = f(1 / f(Math.sqrt(f(f(s * s) + 1))));
  return [a, f(s * a)];
}

/** λ = log α_t − log σ_t (float32). */
function lambdaOf(a: number, s: number): number {
  return f(f(Math.log(a)) - f(Math.log(s)));
}

/**
 * diffusers `DPMSolverMultistepScheduler` as DPM-Solver++ (arXiv 2211.01095) of order 1 or 2
 * (2M, midpoint or Heun), deterministic. The history is the data predictions x̂₀ of the last
 * `solver_order` steps.
 */
export class DpmSolverMultistepScheduler extends SchedulerBase {
  readonly className = 'DPMSolverMultistepScheduler' as const;
  readonly timesteps: Float64Array;
  readonly initNoiseSigma = 1;

  private modelOutputs: (Float32Array | undefined)[];
  private lowerOrderNums = 0;

  constructor(
    private readonly sigmas: Float32Array,
    /** Length of the full schedule (`len(self.timesteps)` in diffusers). */
    private readonly total: number,
    private readonly begin: number,
    timesteps: Float64Array,
    private readonly s: DpmSettings,
    fingerprint: string,
  ) {
    super(fingerprint);
    this.timesteps = timesteps;
    this.modelOutputs = new Array<Float32Array | undefined>(s.order).fill(undefined);
  }

  protected stepAt(mo: Float32Array, i: number, x: Float32Array): Float32Array {
    const si = this.begin + i;
    const { order } = this.s;
    const lowerOrderFinal =
      si === this.total - 1 && (this.s.eulerAtFinal || (this.s.lowerOrderFinal && this.total < 15) || this.s.finalSigmaZero);
    const x0 = this.convertModelOutput(mo, x, this.sigmas[si]);
    for (let k = 0; k < order - 1; k += 1) this.modelOutputs[k] = this.modelOutputs[k + 1];
    this.modelOutputs[order - 1] = x0;
    let out: Float32Array;
    if (order === 1 || this.lowerOrderNums < 1 || lowerOrderFinal) out = this.firstOrder(x0, si, x);
    else {
      // Order 2. (diffusers' `lower_order_second` only matters for order 3.)
      const m1 = this.modelOutputs[order - 2];
      if (!m1) throw unsupported(this.className, 'solver_order', 'history is missing the previous model output');
      out = this.secondOrder(x0, m1, si, x);
    }
    if (this.lowerOrderNums < order) this.lowerOrderNums += 1;
    return out;
  }

  /** DPM-Solver++ needs the data prediction x̂₀. */
  private convertModelOutput(mo: Float32Array, x: Float32Array, sigma: number): Float32Array {
    let x0: Float32Array;
    if (this.s.prediction === 'sample') x0 = mo.slice();
    else {
      const [a, s] = alphaSigma(sigma);
      x0 =
        this.s.prediction === 'epsilon'
          ? Float32Array.from(mo, (v, k) => f(f(x[k] - f(s * v)) / a))
          : Float32Array.from(mo, (v, k) => f(f(a * x[k]) - f(s * v)));
    }
    if (this.s.clipping.thresholding) clipPrediction(x0, this.s.clipping, this.s.batchSize);
    return x0;
  }

  private firstOrder(m: Float32Array, si: number, x: Float32Array): Float32Array {
    const [at, st] = alphaSigma(this.sigmas[si + 1]);
    const [as, ss] = alphaSigma(this.sigmas[si]);
    const h = f(lambdaOf(at, st) - lambdaOf(as, ss));
    const c1 = f(st / ss);
    const c2 = f(at * f(f(Math.exp(-h)) - 1));
    return Float32Array.from(x, (v, k) => f(f(c1 * v) - f(c2 * m[k])));
  }

  private secondOrder(m0: Float32Array, m1: Float32Array, si: number, x: Float32Array): Float32Array {
    const [at, st] = alphaSigma(this.sigmas[si + 1]);
    const [as0, ss0] = alphaSigma(this.sigmas[si]);
    const [as1, ss1] = alphaSigma(this.sigmas[si - 1]);
    const lt = lambdaOf(at, st);
    const l0 = lambdaOf(as0, ss0);
    const l1 = lambdaOf(as1, ss1);
    const h = f(lt - l0);
    const h0 = f(l0 - l1);
    const r0 = f(h0 / h);
    const invR0 = f(1 / r0);
    const c1 = f(st / ss0);
    const em1 = f(f(Math.exp(-h)) - 1);
    const c2 = f(at * em1);
    const out = new Float32Array(x.length);
    if (this.s.solverType === 'midpoint') {
      const c3 = f(0.5 * c2);
      for (let k = 0; k < out.length; k += 1) {
        const d1 = f(invR0 * f(m0[k] - m1[k]));
        out[k] = f(f(f(c1 * x[k]) - f(c2 * m0[k])) - f(c3 * d1));
      }
    } else {
      const c3 = f(at * f(f(em1 / h) + 1));
      for (let k = 0; k < out.length; k += 1) {
        const d1 = f(invR0 * f(m0[k] - m1[k]));
        out[k] = f(f(f(c1 * x[k]) - f(c2 * m0[k])) + f(c3 * d1));
      }
    }
    return out;
  }

  addNoise(original: Float32Array, noise: Float32Array, i: number): Float32Array {
    this.checkIndex(i);
    this.checkSameLength(original, noise, 'original and noise');
    const [a, s] = alphaSigma(this.sigmas[this.begin + i]);
    return Float32Array.from(original, (v, k) => f(f(a * v) + f(s * noise[k])));
  }

  protected saveHistory(): StepHistory {
    const buffers: Record<string, Float32Array> = {};
    this.modelOutputs.forEach((m, k) => {
      if (m) buffers[`model_outputs.${k}`] = m;
    });
    return { values: { lower_order_nums: this.lowerOrderNums }, buffers };
  }

  protected loadHistory(h: StepHistory): void {
    this.lowerOrderNums = requireValue(h, 'lower_order_nums', this.className);
    this.modelOutputs = Array.from({ length: this.s.order }, (_, k) => h.buffers[`model_outputs.${k}`]);
  }
}

export function createDpmSolverMultistepScheduler(r: ConfigReader, o: RunOptions): DpmSolverMultistepScheduler {
  const c = readDpmConfig(r, o);
  const { timesteps: ts, sigmas } = dpmSchedule(c, o.steps);
  const begin = o.strength < 1 ? img2imgStart('ddpm', o.steps, o.strength) : 0;
  const fp = fingerprintOf({ c: r.className, cfg: r.used, o });
  return new DpmSolverMultistepScheduler(sigmas, ts.length, begin, ts.slice(begin), { ...c.settings, batchSize: o.batchSize }, fp);
}

/** What `DPMSolverMultistepScheduler`'s config says, checked against the run's steps. */
interface DpmConfig {
  ac: Float32Array;
  numTrain: number;
  betaSchedule: unknown;
  karras: boolean;
  finalSigma: 'zero' | 'sigma_min';
  lambdaMinClipped: number;
  spacing: TimestepSpacing;
  stepsOffset: number;
  settings: Omit<DpmSettings, 'batchSize'>;
}

function readDpmConfig(r: ConfigReader, o: RunOptions): DpmConfig {
  const { ac, numTrain: N } = readEulerAlphas(r);
  const betaSchedule = r.used.beta_schedule;
  const order = r.int('solver_order', 2, 1);
  if (order > 2) throw unsupported(r.className, 'solver_order', `= ${order} is not supported (supported: 1, 2)`);
  const prediction = r.choice<Prediction>(
    'prediction_type',
    'epsilon',
    ['epsilon', 'sample', 'v_prediction', 'flow_prediction'],
    ['epsilon', 'sample', 'v_prediction'],
  );
  const clipping = readSampleClipping(r, undefined);
  // diffusers maps the legacy names "deis" → "dpmsolver++" and "logrho"/"bh1"/"bh2" → "midpoint".
  r.choice(
    'algorithm_type',
    'dpmsolver++',
    ['dpmsolver', 'dpmsolver++', 'sde-dpmsolver', 'sde-dpmsolver++', 'deis'],
    ['dpmsolver++', 'deis'],
  );
  const solverTypeRaw = r.choice<string>('solver_type', 'midpoint', ['midpoint', 'heun', 'logrho', 'bh1', 'bh2']);
  const solverType = solverTypeRaw === 'heun' ? 'heun' : 'midpoint';
  const lowerOrderFinal = r.bool('lower_order_final', true);
  const eulerAtFinal = r.bool('euler_at_final', false);
  const karras = r.bool('use_karras_sigmas', false);
  for (const name of ['use_exponential_sigmas', 'use_beta_sigmas', 'use_lu_lambdas', 'use_flow_sigmas']) {
    r.refuseIfTrue(name, 'only the default and Karras sigmas are implemented');
  }
  r.refuseIfTrue('use_dynamic_shifting', 'it applies to flow sigmas, which are not implemented');
  const finalSigma = r.choice<'zero' | 'sigma_min'>('final_sigmas_type', 'zero', ['zero', 'sigma_min']);
  const lambdaMinClipped = r.number('lambda_min_clipped', -Infinity, { allowInfinite: true });
  r.choice('variance_type', 'none', ['none', 'learned', 'learned_range'], ['none']);
  const spacing = r.choice<TimestepSpacing>('timestep_spacing', 'linspace', ['linspace', 'leading', 'trailing']);
  const stepsOffset = r.int('steps_offset', 0, 0);
  const n = o.steps;
  if (n > N) throw invalidOption('steps', `${n} is more than num_train_timesteps (${N})`);
  if (karras && n < 2) throw invalidOption('steps', 'Karras sigmas need at least 2 steps');
  const settings = {
    order: order as 1 | 2,
    solverType,
    lowerOrderFinal,
    eulerAtFinal,
    finalSigmaZero: finalSigma === 'zero',
    prediction,
    clipping,
  } as const;
  return { ac, numTrain: N, betaSchedule, karras, finalSigma, lambdaMinClipped, spacing, stepsOffset, settings };
}

/** The run's timesteps and sigmas (`set_timesteps`), the final sigma appended. */
function dpmSchedule(c: DpmConfig, n: number): { timesteps: Float64Array; sigmas: Float32Array } {
  const { ac, numTrain: N } = c;
  // Clip the minimum of λ(t) (critical for the cosine schedule): last_timestep = N − #{λ < clip}.
  const clip = f(c.lambdaMinClipped);
  let clipped = 0;
  for (let t = 0; t < N; t += 1) {
    const a = f(Math.sqrt(ac[t]));
    const s = f(Math.sqrt(f(1 - ac[t])));
    if (lambdaOf(a, s) < clip) clipped += 1;
  }
  const last = N - clipped;
  let ts: Float64Array;
  if (c.spacing === 'linspace') {
    ts = npLinspace(0, last - 1, n + 1)
      .map(roundHalfEven)
      .reverse()
      .slice(0, -1);
  } else if (c.spacing === 'leading') {
    const ratio = Math.floor(last / (n + 1));
    ts = Float64Array.from({ length: n }, (_, k) => (n - k) * ratio + c.stepsOffset);
  } else {
    ts = npArangeDescending(last, N / n).map((t) => roundHalfEven(t) - 1);
  }
  const trainSigmas = sigmasFromAlphasCumprod(ac);
  let sig: Float64Array;
  if (c.karras) {
    const logSigmas = logSigmasF32(trainSigmas);
    sig = karrasSigmas(trainSigmas[0], trainSigmas[N - 1], n);
    ts = sig.map((s) => sigmaToT(s, logSigmas));
    if (c.betaSchedule !== 'squaredcos_cap_v2') ts = ts.map(roundHalfEven);
    ts = ts.map(Math.trunc); // .to(torch.int64)
  } else {
    sig = interpSigmas(ts, trainSigmas);
  }
  return { timesteps: ts, sigmas: Float32Array.from([...sig, c.finalSigma === 'sigma_min' ? trainSigmas[0] : 0]) };
}
