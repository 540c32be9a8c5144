/**
 * Public types of the diffusers-compatible noise schedulers.
 *
 * Conventions shared by every scheduler:
 * - latents and model outputs are `Float32Array`s (diffusers' float32 tensors), flat, any shape;
 * - schedule coefficients follow diffusers' own dtypes: float32 where diffusers holds them in
 *   torch float32 tensors (betas, ᾱ, σ), float64 where it computes with numpy float64, with
 *   the float32 casts where diffusers makes them;
 * - step `i` is the index into `timesteps` (after any img2img slicing), starting at 0.
 */

/** The diffusers scheduler classes this package implements (`_class_name`). */
export type SchedulerClassName =
  | 'PNDMScheduler'
  | 'DDIMScheduler'
  | 'EulerDiscreteScheduler'
  | 'EulerAncestralDiscreteScheduler'
  | 'DPMSolverMultistepScheduler'
  | 'LCMScheduler'
  | 'FlowMatchEulerDiscreteScheduler';

/**
 * Gaussian noise for the stochastic schedulers (Euler ancestral, LCM between steps, DDIM with
 * η > 0). Deterministic and seeded per request. A stochastic step calls `normals` exactly once,
 * with `n` = the sample's length, and uses the values in order.
 */
export interface NoiseSource {
  normals(n: number): Float32Array;
}

/**
 * Everything needed to resume a run mid-way bit for bit: plain JSON values plus Float32Array
 * buffers (the multistep history). `encodeSchedulerState`/`decodeSchedulerState` turn it into
 * bytes and back.
 */
export interface SchedulerState {
  /** Format version of this object. */
  readonly version: 1;
  readonly className: SchedulerClassName;
  /** Identifies the config and options the scheduler was built with; restore refuses another. */
  readonly fingerprint: string;
  /** The step index the next `step()` call must use (= steps completed). */
  readonly nextStep: number;
  /**
   * How many normals the scheduler has drawn from the caller's NoiseSource so far. The noise
   * source itself belongs to the caller: to resume, bring it to the same position (re-create it
   * from the seed and draw this many values, or derive the noise per step from seed and step).
   */
  readonly noiseDrawn: number;
  /** Scheduler-specific counters (PNDM `counter`, DPM `lower_order_nums`, …). */
  readonly values: Readonly<Record<string, number>>;
  /** Scheduler-specific tensors (PNDM `ets.k`, `cur_sample`; DPM `model_outputs.k`). */
  readonly buffers: Readonly<Record<string, Float32Array>>;
}

/** A diffusers noise scheduler, set up for one run of `steps` steps. */
export interface DiffusionScheduler {
  readonly className: SchedulerClassName;
  /**
   * The value fed to the model's timestep input at each model call, in order (length = number
   * of model calls). Integers for the DDPM-discrete schedulers (PNDM, DDIM, DPM-Solver, LCM:
   * diffusers int64); float32 values for Euler, Euler ancestral and flow matching.
   */
  readonly timesteps: Float64Array;
  /** Scale of the starting noise: text-to-image latents = noise × initNoiseSigma. */
  readonly initNoiseSigma: number;
  /**
   * The model input for step `i`. Euler and Euler ancestral divide by √(σᵢ² + 1); every other
   * scheduler returns `sample` itself (not a copy).
   */
  scaleModelInput(sample: Float32Array, i: number): Float32Array;
  /**
   * One scheduler step: the model's output at step `i` (after guidance) and the current sample
   * give the next sample (a new array). Steps must run in order, starting at 0 (or at the step
   * a restored state names). The stochastic schedulers need `noise`.
   */
  step(modelOutput: Float32Array, i: number, sample: Float32Array, noise?: NoiseSource): Float32Array;
  /**
   * The img2img start: `original` (clean latents) noised to the level of step `i` (normally
   * 0), as the diffusers pipelines do (`add_noise`; flow matching: `scale_noise`).
   */
  addNoise(original: Float32Array, noise: Float32Array, i: number): Float32Array;
  getState(): SchedulerState;
  restoreState(state: SchedulerState): void;
}

/** Options of one run. */
export interface CreateSchedulerOptions {
  /** `num_inference_steps`. */
  steps: number;
  /**
   * img2img strength in (0, 1]. The DDPM-discrete and Euler-style schedulers start at
   * `t_start = max(steps − min(⌊steps·strength⌋, steps), 0)` (StableDiffusionImg2ImgPipeline);
   * flow matching at `⌊max(steps − min(steps·strength, steps), 0)⌋` (SD3/Flux img2img);
   * LCM passes it to `set_timesteps` (LatentConsistencyModelImg2ImgPipeline). Default 1.
   */
  strength?: number;
  /**
   * Flow matching with `use_dynamic_shifting`: the image token count (Flux: (H/16)·(W/16)),
   * from which μ is computed as FluxPipeline's `calculate_shift` does.
   */
  imageSeqLen?: number;
  /** Flow matching: μ directly (overrides `imageSeqLen`). */
  mu?: number;
  /**
   * Flow matching: custom sigmas, as a pipeline passes them to `set_timesteps(sigmas=…)`
   * (FluxPipeline passes `fluxPipelineSigmas(steps)`). Length must equal `steps`.
   */
  sigmas?: readonly number[];
  /** DDIM: η (0 = deterministic DDIM, 1 = DDPM-like); a pipeline argument, default 0. */
  eta?: number;
  /** Samples in one latent (batch size) for dynamic thresholding, which works per sample. Default 1. */
  batchSize?: number;
  /** Use this class instead of the config's `_class_name` (diffusers `OtherScheduler.from_config`). */
  className?: SchedulerClassName;
}
