// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): scheduling_flow_match_euler_discrete.py (FlowMatchEulerDiscreteScheduler) and FluxPipeline's calculate_shift,
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import type { ConfigReader } from './config.js';
import { invalidField, invalidOption } from './errors.js';
import { img2imgStart } from './img2img-start.js';
import { f, npLinspace } from './numeric.js';
import type { RunOptions } from './run-options.js';
import { fingerprintOf, SchedulerBase, type StepHistory } from './scheduler-base.js';

/**
 * FluxPipeline's `calculate_shift`: μ grows linearly with the image token count, from
 * `baseShift` at `baseSeqLen` tokens to `maxShift` at `maxSeqLen`.
 */
export function calculateShift(imageSeqLen: number, baseSeqLen = 256, maxSeqLen = 4096, baseShift = 0.5, maxShift = 1.15): number {
  const m = (maxShift - baseShift) / (maxSeqLen - baseSeqLen);
  const b = baseShift - m * baseSeqLen;
  return imageSeqLen * m + b;
}

/** The sigmas FluxPipeline passes to `set_timesteps`: `np.linspace(1.0, 1 / steps, steps)`. */
export function fluxPipelineSigmas(steps: number): number[] {
  return Array.from(npLinspace(1, 1 / steps, steps));
}

/**
 * diffusers `FlowMatchEulerDiscreteScheduler` (rectified flow, SD3/Flux): x_σ = (1 − σ)·x₀ + σ·ε,
 * the model predicts the velocity v = ε − x₀, and x ← x + (σ_{i+1} − σ_i)·v down to σ = 0.
 */
export class FlowMatchEulerScheduler extends SchedulerBase {
  readonly className = 'FlowMatchEulerDiscreteScheduler' as const;
  readonly timesteps: Float64Array;
  readonly initNoiseSigma = 1;

  constructor(
    /** σ per step of the full schedule, then 0 (float32 values). */
    private readonly sigmas: Float32Array,
    private readonly begin: number,
    timesteps: Float64Array,
    fingerprint: string,
  ) {
    super(fingerprint);
    this.timesteps = timesteps;
  }

  protected stepAt(mo: Float32Array, i: number, x: Float32Array): Float32Array {
    const dt = f(this.sigmas[this.begin + i + 1] - this.sigmas[this.begin + i]);
    return Float32Array.from(x, (v, k) => f(v + f(dt * mo[k])));
  }

  /** `scale_noise`: σ·ε + (1 − σ)·x₀ at the σ of step `i`. */
  addNoise(original: Float32Array, noise: Float32Array, i: number): Float32Array {
    this.checkIndex(i);
    this.checkSameLength(original, noise, 'original and noise');
    const s = this.sigmas[this.begin + i];
    const keep = f(1 - s);
    return Float32Array.from(original, (v, k) => f(f(s * noise[k]) + f(keep * v)));
  }

  protected saveHistory(): StepHistory {
    return { values: {}, buffers: {} };
  }

  protected loadHistory(): void {}
}

export function createFlowMatchEulerScheduler(r: ConfigReader, o: RunOptions): FlowMatchEulerScheduler {
  const N = r.int('num_train_timesteps', 1000, 1);
  const shift = r.number('shift', 1, { gt: 0 });
  const dynamic = r.bool('use_dynamic_shifting', false);
  const baseShift = r.number('base_shift', 0.5);
  const maxShift = r.number('max_shift', 1.15);
  const baseSeqLen = r.int('base_image_seq_len', 256, 0);
  const maxSeqLen = r.int('max_image_seq_len', 4096, 1);
  r.refuseIfTrue('invert_sigmas', 'inverted sigma schedules (Mochi) are not implemented');
  const shiftTerminal = r.optionalNumber('shift_terminal', { lt: 1 });
  for (const name of ['use_karras_sigmas', 'use_exponential_sigmas', 'use_beta_sigmas']) {
    r.refuseIfTrue(name, 'only the shifted linear schedule is implemented');
  }
  const timeShiftType = r.choice<'exponential' | 'linear'>('time_shift_type', 'exponential', ['exponential', 'linear']);
  r.refuseIfTrue('stochastic_sampling', 'stochastic flow-matching sampling is not implemented');
  if (dynamic && baseSeqLen === maxSeqLen) {
    throw invalidField('max_image_seq_len', 'must differ from base_image_seq_len for dynamic shifting');
  }

  let mu: number | undefined;
  if (dynamic) {
    if (o.mu !== undefined) mu = o.mu;
    else if (o.imageSeqLen !== undefined) mu = calculateShift(o.imageSeqLen, baseSeqLen, maxSeqLen, baseShift, maxShift);
    else throw invalidOption('imageSeqLen', 'is required: the scheduler config sets use_dynamic_shifting (or pass mu)');
    if (timeShiftType === 'linear' && !(mu > 0)) throw invalidOption('mu', `must be > 0 for time_shift_type "linear", got ${mu}`);
  }

  // __init__: σ = t/N for t = N…1, statically shifted unless dynamic; its ends bound the schedule.
  const shiftF = (s: number): number => f(f(f(shift) * s) / f(1 + f(f(shift - 1) * s)));
  const sigmaMax = dynamic ? f(N / N) : shiftF(f(N / N));
  const sigmaMin = dynamic ? f(1 / N) : shiftF(f(1 / N));

  let sig: Float64Array;
  if (o.sigmas) {
    // Custom sigmas arrive as np.float32: the shifting below is float32 numpy arithmetic.
    let s = Float32Array.from(o.sigmas);
    if (dynamic) {
      const m = f(timeShiftType === 'exponential' ? Math.exp(mu as number) : (mu as number));
      s = s.map((v) => f(m / f(m + f(f(1 / v) - 1))));
    } else s = s.map(shiftF);
    if (shiftTerminal) {
      const omz = s.map((v) => f(1 - v));
      const scale = f(omz[omz.length - 1] / f(1 - shiftTerminal));
      s = omz.map((v) => f(1 - f(v / scale)));
    }
    sig = Float64Array.from(s);
  } else {
    let s = npLinspace(sigmaMax * N, sigmaMin * N, o.steps).map((t) => t / N);
    if (dynamic) {
      const m = timeShiftType === 'exponential' ? Math.exp(mu as number) : (mu as number);
      s = s.map((v) => m / (m + (1 / v - 1)));
    } else s = s.map((v) => (shift * v) / (1 + (shift - 1) * v));
    if (shiftTerminal) {
      const omz = s.map((v) => 1 - v);
      const scale = omz[omz.length - 1] / (1 - shiftTerminal);
      s = omz.map((v) => 1 - v / scale);
    }
    sig = s;
  }
  const sigmasF32 = Float32Array.from(sig);
  const timesteps = Float64Array.from(sigmasF32, (s) => f(s * N));
  const sigmas = Float32Array.from([...sigmasF32, 0]);
  const begin = o.strength < 1 ? img2imgStart('flow', o.steps, o.strength) : 0;
  const fp = fingerprintOf({ c: r.className, cfg: r.used, o: { ...o, mu } });
  return new FlowMatchEulerScheduler(sigmas, begin, timesteps.slice(begin), fp);
}
