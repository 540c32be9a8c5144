import { DEFAULT_STEP_CACHE_MAX_SKIPPED, type StepCacheParams } from '@diffmesh/core';

/**
 * Step caching of one denoising run, after TeaCache (Liu et al., "Timestep Embedding Tells:
 * It's Time to Cache for Video Diffusion Model", arXiv 2411.19108; github.com/ali-vilab/TeaCache):
 * at every step the relative L1 distance between this step's and the previous step's input,
 * `Σ|xᵢ − xᵢ₋₁| / Σ|xᵢ₋₁|`, is added to an accumulator; while the accumulator stays below
 * `threshold` (and fewer than `maxSkippedSteps` steps in a row were skipped) the denoiser is
 * not run and the last computed output is used again; when it runs, the accumulator resets.
 * The first step of a run (and of a resumed run: the cache is not checkpointed) and the last
 * step always run.
 *
 * Where this differs from TeaCache: TeaCache measures the *timestep-modulated input of the
 * first transformer block* (rescaled by a polynomial fitted per model) and reuses the
 * *residual* of the transformer blocks (output − input hidden states). diffmesh runs each
 * denoiser as one ONNX graph, so neither is visible: the measured input is the latent as fed
 * to the graph (after the scheduler's `scale_model_input`; it moves with the timestep, since
 * each step's update is a timestep-sized move of the latent), with no rescaling polynomial,
 * and what is reused is the graph's output, the noise / velocity prediction (with CFG, the
 * guided combination: both branches see the same latent, so they skip together).
 */
export class StepCache {
  private readonly threshold: number;
  private readonly maxSkipped: number;
  /** The input of the previous step (a copy: the built-in loop updates its latent in place). */
  private previous: Float32Array | undefined;
  /** The last computed output. */
  private last: Float32Array | undefined;
  private accumulated = 0;
  private run = 0;
  /** Steps whose denoiser ran / reused the last output. */
  computed = 0;
  skipped = 0;

  /** @param lastStep the index of the run's last step (always computed). */
  constructor(
    settings: StepCacheParams,
    private readonly lastStep: number,
  ) {
    this.threshold = settings.threshold ?? 0;
    this.maxSkipped = settings.maxSkippedSteps ?? DEFAULT_STEP_CACHE_MAX_SKIPPED;
  }

  /** The cache of a run with these settings, or undefined when they leave caching off. */
  static of(settings: StepCacheParams | undefined, lastStep: number): StepCache | undefined {
    const cache = settings ? new StepCache(settings, lastStep) : undefined;
    return cache && cache.threshold > 0 && cache.maxSkipped > 0 ? cache : undefined;
  }

  /**
   * The cached output to use at step `i` instead of running the denoiser on `input`, or
   * undefined when the step must run (then hand its output to {@link store}). Call once per step.
   */
  lookup(input: Float32Array, i: number): Float32Array | undefined {
    const previous = this.previous;
    this.previous = Float32Array.from(input);
    if (previous !== undefined && this.last !== undefined && i !== this.lastStep) {
      this.accumulated += relativeL1(previous, input);
      if (this.accumulated < this.threshold && this.run < this.maxSkipped) {
        this.run += 1;
        this.skipped += 1;
        // A copy: a scheduler may keep or change the output it is given.
        return Float32Array.from(this.last);
      }
    }
    this.accumulated = 0;
    this.run = 0;
    this.computed += 1;
    return undefined;
  }

  /** The output computed at the step {@link lookup} said must run (kept as a copy). */
  store(out: Float32Array): void {
    this.last = Float32Array.from(out);
  }
}

/** `Σ|b − a| / Σ|a|` (0 when both are zero, ∞ when only `a` is). */
export function relativeL1(a: Float32Array, b: Float32Array): number {
  let diff = 0;
  let norm = 0;
  for (let k = 0; k < a.length; k += 1) {
    diff += Math.abs(b[k] - a[k]);
    norm += Math.abs(a[k]);
  }
  return diff === 0 ? 0 : diff / norm;
}

/** The stage warning of a run that skipped steps: the model calls it saved. */
export function stepCacheWarning(cache: StepCache, callsPerStep: number): string | undefined {
  if (cache.skipped === 0) return undefined;
  const steps = cache.computed + cache.skipped;
  return (
    `step cache: ${cache.skipped} of ${steps} denoising steps reused the last model output ` +
    `(${cache.skipped * callsPerStep} of ${steps * callsPerStep} model calls skipped)`
  );
}
