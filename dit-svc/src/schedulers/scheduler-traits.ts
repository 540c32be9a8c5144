import { ConfigReader } from './config.js';
import { resolveClass } from './create-scheduler.js';
import type { SchedulerClassName } from './types.js';

/** What the denoiser predicts: ε, v, x₀, or (flow matching) the velocity ε − x₀. */
export type PredictionType = 'epsilon' | 'v_prediction' | 'sample' | 'flow';

/**
 * How the pipeline applies the guidance scale:
 * - `cfg`: classifier-free guidance, uncond + g·(cond − uncond), on when g > 1 (diffusers'
 *   `do_classifier_free_guidance`);
 * - `embedded`: guidance-distilled model, one pass per step, no negative prompt; the scale goes
 *   into a model input (Flux-dev `guidance` = g; LCM UNets `timestep_cond` = the w-embedding of
 *   g − 1);
 * - `none`: no guidance at all (Flux-schnell).
 */
export type GuidanceMode = 'cfg' | 'embedded' | 'none';

export interface SchedulerTraits {
  className: SchedulerClassName;
  predictionType: PredictionType;
  guidance: GuidanceMode;
  /** `scaleModelInput` divides by √(σ²+1) (Euler, Euler ancestral); otherwise it is the identity. */
  scalesModelInput: boolean;
  /** `step` needs a NoiseSource (Euler ancestral, LCM with more than one step, DDIM with η > 0). */
  needsNoise: boolean;
  /**
   * Timestep values: `integer` (diffusers int64; feed an int64 input as is, a float input as the
   * same number) or `float` (float32 values; an int64 input would truncate them).
   */
  timestepValues: 'integer' | 'float';
}

/**
 * What a pipeline driving this scheduler must know about the model: its prediction type (from
 * the scheduler config, as diffusers takes it) and how to apply guidance. `modelInputs` are the
 * denoiser graph's input names, which tell guidance-distilled models apart (`guidance`,
 * `timestep_cond`, Flux's `img_ids`/`txt_ids`).
 */
export function schedulerTraits(
  config: unknown,
  opts: { className?: SchedulerClassName; modelInputs?: readonly string[]; eta?: number; steps?: number } = {},
): SchedulerTraits {
  const { raw, className } = resolveClass(config, opts.className);
  const r = new ConfigReader(className, raw);
  const inputs = new Set(opts.modelInputs ?? []);
  const flow = className === 'FlowMatchEulerDiscreteScheduler';
  let predictionType: PredictionType = 'flow';
  if (!flow) {
    const p = r.choice<string>('prediction_type', 'epsilon', ['epsilon', 'v_prediction', 'sample', 'original_sample', 'flow_prediction']);
    predictionType = p === 'original_sample' ? 'sample' : p === 'flow_prediction' ? 'flow' : (p as PredictionType);
  }
  let guidance: GuidanceMode = 'cfg';
  if (inputs.has('guidance') || inputs.has('timestep_cond')) guidance = 'embedded';
  else if (inputs.has('img_ids') || inputs.has('txt_ids')) guidance = 'none';
  const stochastic =
    className === 'EulerAncestralDiscreteScheduler' ||
    (className === 'LCMScheduler' && (opts.steps ?? 2) > 1) ||
    (className === 'DDIMScheduler' && (opts.eta ?? 0) > 0);
  return {
    className,
    predictionType,
    guidance,
    scalesModelInput: className === 'EulerDiscreteScheduler' || className === 'EulerAncestralDiscreteScheduler',
    needsNoise: stochastic,
    timestepValues: ['EulerDiscreteScheduler', 'EulerAncestralDiscreteScheduler', 'FlowMatchEulerDiscreteScheduler'].includes(className)
      ? 'float'
      : 'integer',
  };
}
