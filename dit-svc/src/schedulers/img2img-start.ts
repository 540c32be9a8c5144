// Follows diffusers (https://github.com/huggingface/diffusers, Apache License 2.0, Copyright The
// HuggingFace Team and the authors named there): the img2img pipelines' get_timesteps (StableDiffusionImg2ImgPipeline, SD3/Flux img2img),
// 2025 releases (0.3x). Rewritten in TypeScript by the diffmesh authors, with the same float32
// arithmetic; see NOTICE.
import { invalidOption } from './errors.js';

/**
 * Where an img2img run starts in the schedule (`t_start`; the pipelines slice
 * `scheduler.timesteps[t_start * order:]`, and every scheduler here has order 1).
 *
 * - `ddpm`: StableDiffusionImg2ImgPipeline.get_timesteps:
 *   `init = min(int(steps * strength), steps); t_start = max(steps - init, 0)`.
 * - `flow`: StableDiffusion3Img2ImgPipeline / FluxImg2ImgPipeline.get_timesteps:
 *   `init = min(steps * strength, steps); t_start = int(max(steps - init, 0))`.
 */
export function img2imgStart(kind: 'ddpm' | 'flow', steps: number, strength: number): number {
  const start =
    kind === 'ddpm'
      ? Math.max(steps - Math.min(Math.trunc(steps * strength), steps), 0)
      : Math.trunc(Math.max(steps - Math.min(steps * strength, steps), 0));
  if (start >= steps) {
    throw invalidOption('strength', `${strength} with ${steps} steps leaves no denoising step; raise strength or steps`);
  }
  return start;
}

export function checkStrength(strength: number | undefined): number {
  const s = strength ?? 1;
  if (typeof s !== 'number' || !(s > 0 && s <= 1)) throw invalidOption('strength', `must be in (0, 1], got ${String(strength)}`);
  return s;
}
