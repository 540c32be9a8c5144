import { DEFAULT_STRENGTH, invalidParameter, type StageTask } from '@diffmesh/core';
import { float32View, type TensorStore } from '@diffmesh/tensor-client';
import { FlowEulerSampler, type Sampler } from './samplers.js';

/** The image conditioning of one run: its first step, and the hold of the first frame. */
export interface ImageConditioning {
  /** The step `strength` picks: the run starts there. */
  start: number;
  /** Sets the first latent frame to the image's latent (before every step and after the last). */
  hold(): void;
}

/**
 * Image-to-video for built-in flow models: the first latent frame is the input image's latent
 * `z` (`image_latents` from the image_encoding stage, [1, C, 1, h, w]), held clean at every
 * step, the way I2V models take the clean first-frame latent as conditioning. The denoiser's
 * posterior over the whole clip sees that frame, so the frames after it follow the image
 * (shape, colours, place) as far as the prompt leaves them open; the clip opens on the image.
 * `strength` (default 0.8) is read as in img2img: every frame starts from `z` noised to the
 * step it picks, `(1 − σ)·z + σ·ε` (1 = from pure noise). Writes that start into `x` (the noise
 * [1, C, F, h, w]); undefined without an input image.
 */
export async function imageConditioning(
  task: StageTask,
  store: TensorStore,
  shape: number[],
  sampler: Sampler,
  x: Float32Array,
): Promise<ImageConditioning | undefined> {
  const ref = task.inputs.image_latents;
  if (!ref) return undefined;
  if (!(sampler instanceof FlowEulerSampler)) {
    throw invalidParameter('input_image', `model "${task.model}" cannot be conditioned on an image (its sampler is not flow matching)`);
  }
  const [, C, F, h, w] = shape;
  if (ref.shape.join('x') !== [1, C, 1, h, w].join('x')) {
    throw invalidParameter('image_latents', `expected [1, ${C}, 1, ${h}, ${w}], got [${ref.shape.join(', ')}]`);
  }
  const z = float32View((await store.get(ref)).data);
  const steps = sampler.timesteps.length;
  const strength = task.params.strength ?? DEFAULT_STRENGTH;
  // As the flow-matching img2img pipelines: t_start = int(max(steps − steps·strength, 0)).
  const start = Math.trunc(Math.max(steps - Math.min(steps * strength, steps), 0));
  if (start >= steps) throw invalidParameter('strength', `${strength} with ${steps} steps leaves no denoising step`);
  const plane = h * w;
  const s0 = sampler.sigmas[start];
  for (let c = 0; c < C; c += 1) {
    for (let f = 0; f < F; f += 1) {
      const at = (c * F + f) * plane;
      for (let k = 0; k < plane; k += 1) x[at + k] = (1 - s0) * z[c * plane + k] + s0 * x[at + k];
    }
  }
  return {
    start,
    hold: () => {
      for (let c = 0; c < C; c += 1) x.set(z.subarray(c * plane, (c + 1) * plane), c * F * plane);
    },
  };
}
