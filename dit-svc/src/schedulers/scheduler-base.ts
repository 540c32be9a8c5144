import { invalidUse, SchedulerError } from './errors.js';
import type { DiffusionScheduler, NoiseSource, SchedulerClassName, SchedulerState } from './types.js';

/** What a concrete scheduler keeps between steps besides the step index. */
export interface StepHistory {
  values: Record<string, number>;
  buffers: Record<string, Float32Array>;
}

/**
 * The parts every scheduler shares: the step-order checks, noise accounting and the
 * get/restore of state. Subclasses implement `stepAt` and their history.
 */
export abstract class SchedulerBase implements DiffusionScheduler {
  abstract readonly className: SchedulerClassName;
  abstract readonly timesteps: Float64Array;
  abstract readonly initNoiseSigma: number;

  private nextStep = 0;
  private noiseDrawn = 0;

  protected constructor(private readonly fingerprint: string) {}

  scaleModelInput(sample: Float32Array, i: number): Float32Array {
    this.checkIndex(i);
    return sample;
  }

  step(modelOutput: Float32Array, i: number, sample: Float32Array, noise?: NoiseSource): Float32Array {
    this.checkIndex(i);
    if (i !== this.nextStep) {
      throw invalidUse(`${this.className}: step ${i} called, but the next step is ${this.nextStep} (steps run in order)`);
    }
    if (modelOutput.length !== sample.length) {
      throw invalidUse(`${this.className}: model output has ${modelOutput.length} values, sample has ${sample.length}`);
    }
    const out = this.stepAt(modelOutput, i, sample, noise);
    this.nextStep += 1;
    return out;
  }

  abstract addNoise(original: Float32Array, noise: Float32Array, i: number): Float32Array;

  getState(): SchedulerState {
    const h = this.saveHistory();
    const buffers: Record<string, Float32Array> = {};
    for (const [k, v] of Object.entries(h.buffers)) buffers[k] = v.slice();
    return {
      version: 1,
      className: this.className,
      fingerprint: this.fingerprint,
      nextStep: this.nextStep,
      noiseDrawn: this.noiseDrawn,
      values: { ...h.values },
      buffers,
    };
  }

  restoreState(state: SchedulerState): void {
    if (state?.version !== 1) throw invalidUse(`${this.className}: unknown scheduler state version ${String(state?.version)}`);
    if (state.className !== this.className) {
      throw invalidUse(`${this.className}: state was saved by ${state.className}`);
    }
    if (state.fingerprint !== this.fingerprint) {
      throw invalidUse(`${this.className}: state was saved with another scheduler config or options`);
    }
    if (!Number.isInteger(state.nextStep) || state.nextStep < 0 || state.nextStep > this.timesteps.length) {
      throw invalidUse(`${this.className}: state step ${state.nextStep} is outside 0…${this.timesteps.length}`);
    }
    const buffers: Record<string, Float32Array> = {};
    for (const [k, v] of Object.entries(state.buffers)) {
      if (!(v instanceof Float32Array)) throw invalidUse(`${this.className}: state buffer ${k} is not a Float32Array`);
      buffers[k] = v.slice();
    }
    this.loadHistory({ values: { ...state.values }, buffers });
    this.nextStep = state.nextStep;
    this.noiseDrawn = state.noiseDrawn;
  }

  /** The scheduler-specific update of step `i`. */
  protected abstract stepAt(modelOutput: Float32Array, i: number, sample: Float32Array, noise?: NoiseSource): Float32Array;

  protected abstract saveHistory(): StepHistory;
  protected abstract loadHistory(h: StepHistory): void;

  /** Draws `n` normals for a stochastic step (diffusers `randn_tensor`). */
  protected drawNoise(noise: NoiseSource | undefined, n: number, why: string): Float32Array {
    if (!noise) throw invalidUse(`${this.className}: step needs a NoiseSource (${why})`);
    const z = noise.normals(n);
    if (!(z instanceof Float32Array) || z.length !== n) {
      throw invalidUse(`${this.className}: NoiseSource.normals(${n}) must return a Float32Array of ${n} values`);
    }
    this.noiseDrawn += n;
    return z;
  }

  protected checkIndex(i: number): void {
    if (!Number.isInteger(i) || i < 0 || i >= this.timesteps.length) {
      throw invalidUse(`${this.className}: step index ${i} is outside 0…${this.timesteps.length - 1}`);
    }
  }

  protected checkSameLength(a: Float32Array, b: Float32Array, what: string): void {
    if (a.length !== b.length) throw invalidUse(`${this.className}: ${what} lengths differ (${a.length} vs ${b.length})`);
  }
}

/** A buffer that a restored state must contain. */
export function requireBuffer(h: StepHistory, key: string, className: string): Float32Array {
  const b = h.buffers[key];
  if (!b) throw new SchedulerError('INVALID_USE', `${className}: state lacks buffer ${key}`);
  return b;
}

/** A counter that a restored state must contain. */
export function requireValue(h: StepHistory, key: string, className: string): number {
  const v = h.values[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new SchedulerError('INVALID_USE', `${className}: state lacks value ${key}`);
  return v;
}

/** A stable short fingerprint (FNV-1a, 32 bit) of the config a scheduler was built with. */
export function fingerprintOf(value: unknown): string {
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
    if (v instanceof Float64Array || v instanceof Float32Array) return Array.from(v);
    return v;
  });
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}
